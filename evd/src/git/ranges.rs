//! "Did a commit between `base` and `tip` touch these paths?" — `git rev-list <base>..<tip> --
//! <paths>` — the one git question verdicts ask per ground: trigger liveness (base: the latest
//! receipt's commit, tip: HEAD) and 0.1.29's diff-aware sha staleness (base: the ground's
//! `verified_at_sha`, tip: the staleness reference).
//!
//! An answer depends only on the two commits and the paths, so answers are kept per tip, and
//! when a tip moves by a few plain commits they are carried over with three git processes
//! instead of one per question ([`carry`]). They also outlive evd: [`persist`] keeps them in the
//! store's host-local `results/`, and [`restore`] takes them back only for the repository,
//! shallow boundary and replace refs they were learnt in.

use std::collections::HashSet;

use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::git::run::git;

/// What git said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Range {
    /// The range is empty for these paths.
    Untouched,
    /// At least one commit in the range touched them.
    Touched,
    /// git could not say (an unknown commit, no repository, a base that reads as an option).
    Failed,
}

/// base commit → `triggered_by` paths → answer, for one tip.
pub type Answers = FxHashMap<String, FxHashMap<Vec<String>, Range>>;

/// The answer for one question, asking git.
pub fn ask(root: &Path, base: &str, tip: &str, paths: &[String]) -> Range {
    // A receipt is trusted as written, but never as a git option.
    if base.is_empty() || base.starts_with('-') || tip.is_empty() || tip.starts_with('-') {
        return Range::Failed;
    }
    let range = format!("{base}..{tip}");
    let mut args = vec!["rev-list", "--max-count=1", range.as_str(), "--"];
    args.extend(paths.iter().map(String::as_str));
    let mut cmd = crate::git::run::repository_git(root, &args);
    match crate::sys::child::output(&mut cmd, crate::sys::child::git_timeout()) {
        Ok(out) if out.status.success() => {
            if out.stdout.iter().all(u8::is_ascii_whitespace) {
                Range::Untouched
            } else {
                Range::Touched
            }
        }
        _ => Range::Failed,
    }
}

/// Answer every question of `todo` against `tip`, a few git processes at a time. `None` when a
/// worker failed (its questions are then asked one by one by whoever needs them).
pub fn ask_all(root: &Path, tip: &str, todo: &[(String, Vec<String>)]) -> Option<Vec<Range>> {
    if todo.is_empty() {
        return Some(Vec::new());
    }
    // Mostly waiting on process start-up: a few more workers than cores.
    let workers = std::thread::available_parallelism()
        .map(|n| n.get() * 2)
        .unwrap_or(2)
        .clamp(1, 8);
    let chunk = todo.len().div_ceil(workers).max(16);
    let answers: Vec<Range> = std::thread::scope(|scope| {
        let handles: Vec<_> = todo
            .chunks(chunk)
            .map(|c| {
                scope.spawn(move || {
                    let answers = c
                        .iter()
                        .map(|(base, paths)| ask(root, base, tip, paths))
                        .collect::<Vec<Range>>();
                    (answers, crate::sys::child::take_timeouts())
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                let (answers, timeouts) = h.join().unwrap_or_default();
                // The request's thread learns which git children overran.
                crate::sys::child::note_timeouts(timeouts);
                answers
            })
            .collect()
    });
    (answers.len() == todo.len()).then_some(answers)
}

/// At most this many new commits are carried over by [`carry`]; more ask git afresh.
const CARRY_MAX_COMMITS: usize = 64;

/// Whether a `triggered_by` list can be matched by [`proto::pathspec::covers`] against paths git
/// lists relative to the store's root: no pathspec magic, nothing above the root.
pub fn plain_paths(paths: &[String]) -> bool {
    paths.iter().all(|t| plain_path(t))
}

/// One `triggered_by` entry [`plain_paths`] accepts.
pub fn plain_path(t: &str) -> bool {
    !(t.starts_with(':') || t.starts_with('/') || t.split('/').any(|c| c == ".."))
}

/// At most this many base commits are named on one command line by [`carry`]; more ask git
/// afresh.
const CARRY_MAX_BASES: usize = 4096;

/// Commits known to be reachable from a tip (the tip itself included): a base among them cannot
/// reach a commit made on top of that tip, so carrying past it asks git nothing about it.
/// Reachability never changes (commits are immutable), so what was learnt for one tip holds for
/// every tip built on it.
#[derive(Debug, Default, Clone)]
pub struct Reachable {
    pub tip: String,
    pub commits: HashSet<String>,
}

/// At most this many commits are remembered as reachable; beyond, the set starts again.
const REACHABLE_MAX: usize = 8192;

/// Carry the answers known at tip `old` over to tip `new`, when `new` extends `old` by a few
/// single-parent commits (the usual commit, or a fast-forward): one or two git processes instead
/// of one `rev-list` per base commit and path set. `reachable` holds commits known to be
/// reachable from `old`; what is known to be reachable from `new` comes back with the answers.
///
/// With `N` the new commits (a chain from `old`), `C..new` is `C..old` plus the commits of `N`
/// that `C` does not reach. When no base reaches the oldest of `N` (each is reachable from
/// `old`, known or as `git rev-list <bases> --not old` shows by not listing it), that is all of
/// `N` for every base: an answer that was "touched" stays so, and one that was "untouched"
/// becomes "touched" exactly when a commit of `N` changed a path the triggers cover (a
/// single-parent commit is in `git rev-list -- <paths>` exactly when its own diff touches one,
/// renames counted on both sides). Failed answers and path sets [`plain_paths`] refuses are left
/// out (asked again), and `None` comes back — everything asked again — for a merge, a rewind, a
/// reset elsewhere, too many commits or bases, a base reaching into `N`, or any git failure.
pub fn carry(
    root: &Path,
    old: &str,
    new: &str,
    memo: Answers,
    reachable: &HashSet<String>,
) -> Option<(Answers, HashSet<String>)> {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(old) || !hex(new) || old == new {
        return None;
    }
    // Bases git could not answer for (an unknown commit) are dropped below anyway; those known
    // to be reachable from `old` need no question.
    let bases: Vec<&str> = memo
        .iter()
        .filter(|(b, m)| hex(b) && m.values().any(|r| *r != Range::Failed))
        .map(|(b, _)| b.as_str())
        .filter(|b| *b != old && !reachable.contains(*b))
        .collect();
    if bases.len() > CARRY_MAX_BASES {
        return None;
    }
    // The two git processes run side by side: this is the wait right after a commit.
    let (log, beyond) = std::thread::scope(|s| {
        // What the bases reach beyond `old`: usually nothing at all.
        let beyond = (!bases.is_empty()).then(|| {
            s.spawn(|| {
                let mut args: Vec<&str> = vec!["rev-list"];
                args.extend(bases.iter().copied());
                args.extend(["--not", old]);
                crate::git::run::git_ok(root, &args)
            })
        });
        // The new commits with their parents and what each changed, relative to the store's
        // root (what `triggered_by` is relative to; nothing outside it can be covered by plain
        // paths). Each reads `\x01<id> <parent>…\0\n<file>\0<file>\0…`, or `\x01<id> <parent>\0`
        // when it changed nothing under the root.
        let log = git(
            root,
            &[
                "log",
                "-z",
                "--no-renames",
                "--relative",
                "--name-only",
                &format!("--max-count={}", CARRY_MAX_COMMITS + 1),
                "--format=%x01%H %P",
                &format!("{old}..{new}"),
            ],
        );
        // A worker that panicked answers nothing: no carry.
        let beyond = match beyond {
            None => Some(String::new()),
            Some(h) => h.join().ok().flatten(),
        };
        (log, beyond)
    });
    let (log, beyond) = (log?, beyond?);
    let mut commits = HashSet::new();
    let mut parents = Vec::new();
    let mut changed: Vec<Vec<String>> = Vec::new();
    for chunk in log.split('\u{1}').skip(1) {
        let mut parts = chunk.split('\0');
        let header = parts.next()?;
        let mut ids = header.split_whitespace();
        let (Some(c), Some(p), None) = (ids.next(), ids.next(), ids.next()) else {
            return None; // a merge or a root commit
        };
        if !hex(c) || !hex(p) {
            return None;
        }
        commits.insert(c.to_string());
        parents.push(p.to_string());
        let files: Vec<String> = parts
            .map(|f| f.strip_prefix('\n').unwrap_or(f))
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        if files.iter().any(|f| f.contains('\u{FFFD}')) {
            return None;
        }
        changed.push(files);
    }
    if commits.is_empty() || commits.len() > CARRY_MAX_COMMITS {
        return None;
    }
    // A chain growing from `old`: every parent is `old` or another new commit, and exactly one
    // new commit (the oldest) sits on `old`.
    if !parents.iter().all(|p| p == old || commits.contains(p))
        || parents.iter().filter(|p| *p == old).count() != 1
    {
        return None;
    }
    let oldest = commits
        .iter()
        .find(|c| !parents.contains(c))
        .cloned()
        .filter(|_| commits.len() == parents.len())?;
    if beyond.lines().any(|l| l.trim() == oldest) {
        return None;
    }
    // Reachable from `new`: what was from `old`, `old` itself, the bases `beyond` does not list,
    // and the new commits.
    let listed: HashSet<&str> = beyond.lines().map(str::trim).collect();
    let mut now_reachable = if reachable.len() + bases.len() + commits.len() < REACHABLE_MAX {
        reachable.clone()
    } else {
        HashSet::new()
    };
    now_reachable.insert(old.to_string());
    now_reachable.extend(
        bases
            .iter()
            .filter(|b| !listed.contains(**b))
            .map(|b| b.to_string()),
    );
    now_reachable.extend(commits.iter().cloned());
    let touches = |paths: &[String]| {
        if paths.is_empty() {
            return true; // `rev-list C..tip --` lists every new commit
        }
        changed.iter().any(|files| {
            files
                .iter()
                .any(|f| paths.iter().any(|t| proto::pathspec::covers(t, f)))
        })
    };
    let mut out = Answers::default();
    for (base, answers) in memo {
        if !hex(&base) {
            continue;
        }
        let carried: FxHashMap<Vec<String>, Range> = answers
            .into_iter()
            .filter(|(paths, was)| *was != Range::Failed && plain_paths(paths))
            .map(|(paths, was)| {
                let now = if was == Range::Touched || touches(&paths) {
                    Range::Touched
                } else {
                    Range::Untouched
                };
                (paths, now)
            })
            .collect();
        if !carried.is_empty() {
            out.insert(base, carried);
        }
    }
    Some((out, now_reachable))
}

/// How many tips' answers a store keeps (HEAD and the staleness reference, and the one before).
const KEEP_TIPS: usize = 3;

/// The answers a store knows, per tip, most recently used last.
#[derive(Debug, Default)]
pub struct Memo {
    tips: Vec<(String, Answers)>,
    /// Something was learnt since the last [`Memo::take_dirty`].
    dirty: bool,
    /// Tips carried over since answers were last written.
    carries: usize,
    /// What is known to be reachable from the last tip carried to.
    reachable: Reachable,
}

impl Memo {
    /// Take the answers for `tip`: those kept for it, else those of the most recently used tip
    /// carried over ([`carry`]), else none. Hand them back with [`Memo::keep`].
    pub fn take(&mut self, root: &Path, tip: &str) -> Answers {
        if let Some(i) = self.tips.iter().position(|(t, _)| t == tip) {
            return self.tips.remove(i).1;
        }
        let Some((old, answers)) = self.tips.last() else {
            return Answers::default();
        };
        if answers.is_empty() {
            return Answers::default();
        }
        let had = answers.len();
        let empty = HashSet::new();
        let reachable = if self.reachable.tip == *old {
            &self.reachable.commits
        } else {
            &empty
        };
        let carried = carry(root, old, tip, answers.clone(), reachable);
        tracing::debug!(
            from = %old,
            to = %tip,
            bases = had,
            carried = carried.as_ref().map(|(m, _)| m.len()),
            "a tip moved: git answers carried over"
        );
        // Carried answers are not written by themselves: the next start carries them again from
        // the tip on disk, as long as it is a few commits back (see [`Memo::keep`]).
        let Some((answers, reachable)) = carried else {
            return Answers::default();
        };
        self.carries += 1;
        self.reachable = Reachable {
            tip: tip.to_string(),
            commits: reachable,
        };
        answers
    }

    /// Whether answers for `tip` are kept.
    pub fn has(&self, tip: &str) -> bool {
        self.tips.iter().any(|(t, _)| t == tip)
    }

    /// Make sure answers for `tip` are at hand (carried over from the last tip when it moved),
    /// so that a later [`Memo::take`] finds them without asking git.
    pub fn advance(&mut self, root: &Path, tip: &str) {
        if self.tips.iter().any(|(t, _)| t == tip) {
            return;
        }
        let answers = self.take(root, tip);
        self.keep(tip.to_string(), answers, false);
    }

    /// Keep `answers` as those of `tip`; `learnt` says whether any are new.
    pub fn keep(&mut self, tip: String, answers: Answers, learnt: bool) {
        self.tips.retain(|(t, _)| *t != tip);
        self.tips.push((tip, answers));
        let excess = self.tips.len().saturating_sub(KEEP_TIPS);
        self.tips.drain(..excess);
        self.dirty |= learnt;
    }

    pub fn clear(&mut self) {
        self.tips.clear();
    }

    /// Whether answers are worth writing again: new ones were learnt, or the tip on disk fell
    /// so far behind that a restart could no longer carry from it.
    pub fn take_dirty(&mut self) -> bool {
        let due = self.dirty || self.carries >= CARRY_MAX_COMMITS / 4;
        if due {
            self.dirty = false;
            self.carries = 0;
        }
        due
    }
}

/// The file under `results/` that keeps a store's answers across restarts.
pub const CACHE_FILE: &str = "evd-git-answers.json";
const CACHE_VERSION: u32 = 1;
/// A cache file larger than this is not read (and not written).
const CACHE_MAX_BYTES: u64 = 64 << 20;

/// One tip's answers as written: `[base, paths, touched]` rows.
type TipRows = (String, Vec<(String, Vec<String>, bool)>);

#[derive(Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    /// What the answers were learnt in: see [`repository_identity`].
    repository: String,
    /// Tip → `[base, paths, touched]`.
    tips: Vec<TipRows>,
    /// SHA-256 of the canonical JSON of the fields above.
    digest: String,
}

/// What answers depend on beyond the commits themselves: the repository (its common directory),
/// its shallow boundary and its grafts. `None` when replace refs are in use (they rewrite
/// history without changing ids), or the repository cannot be located.
fn repository_identity(root: &Path) -> Option<String> {
    let common = git(
        root,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    let common = PathBuf::from(common);
    let replaced = git(
        root,
        &["for-each-ref", "--count=1", "--format=x", "refs/replace/"],
    );
    if replaced.is_some() {
        return None;
    }
    let digest_of = |p: PathBuf| match crate::sys::fsio::read_followed(&p, 64 << 20) {
        Ok(b) => proto::id::sha256_hex(&b),
        Err(_) => "-".to_string(),
    };
    Some(format!(
        "{}\n{}\n{}",
        common.display(),
        digest_of(common.join("shallow")),
        digest_of(common.join("info").join("grafts"))
    ))
}

fn digest(version: u32, repository: &str, tips: &[TipRows]) -> String {
    let body = serde_json::json!([version, repository, tips]);
    proto::id::sha256_hex(body.to_string().as_bytes())
}

/// Write `memo`'s answers (failures aside) to the store's `results/`, atomically.
pub fn persist(root: &Path, results: &Path, memo: &Memo) {
    let Some(repository) = repository_identity(root) else {
        let _ = std::fs::remove_file(results.join(CACHE_FILE));
        return;
    };
    let tips: Vec<TipRows> = memo
        .tips
        .iter()
        .map(|(tip, answers)| {
            let mut rows: Vec<(String, Vec<String>, bool)> = answers
                .iter()
                .flat_map(|(base, m)| {
                    m.iter().filter_map(move |(paths, r)| match r {
                        Range::Failed => None,
                        r => Some((base.clone(), paths.clone(), *r == Range::Touched)),
                    })
                })
                .collect();
            rows.sort();
            (tip.clone(), rows)
        })
        .collect();
    let file = CacheFile {
        version: CACHE_VERSION,
        digest: digest(CACHE_VERSION, &repository, &tips),
        repository,
        tips,
    };
    let Ok(bytes) = serde_json::to_vec(&file) else {
        return;
    };
    // Never recreate a `results/` someone removed.
    if bytes.len() as u64 > CACHE_MAX_BYTES || !results.is_dir() {
        return;
    }
    if let Err(e) = crate::sys::fsio::replace_unsynced(&results.join(CACHE_FILE), &bytes) {
        tracing::debug!(error = %e, "cannot keep git answers for the next start");
    }
}

/// The answers a previous evd kept for this store, when they were learnt in this very
/// repository (same common directory, shallow boundary and grafts, no replace refs) and the file
/// is whole (its digest holds). Anything else reads as nothing learnt.
pub fn restore(root: &Path, results: &Path) -> Memo {
    let path = results.join(CACHE_FILE);
    let Ok(f) = crate::sys::fsio::open_regular(&path) else {
        return Memo::default();
    };
    if f.metadata().map_or(true, |m| m.len() > CACHE_MAX_BYTES) {
        return Memo::default();
    }
    let Ok(file) = serde_json::from_reader::<_, CacheFile>(std::io::BufReader::new(f)) else {
        return Memo::default();
    };
    let whole = file.version == CACHE_VERSION
        && file.digest == digest(file.version, &file.repository, &file.tips);
    if !whole || repository_identity(root).as_deref() != Some(file.repository.as_str()) {
        return Memo::default();
    }
    let hex40 = |s: &str| proto::model::is_40_lower_hex(s);
    let tips = file
        .tips
        .into_iter()
        .filter(|(tip, _)| hex40(tip))
        .map(|(tip, rows)| {
            let mut answers = Answers::default();
            for (base, paths, touched) in rows {
                let r = if touched {
                    Range::Touched
                } else {
                    Range::Untouched
                };
                answers.entry(base).or_default().insert(paths, r);
            }
            (tip, answers)
        })
        .collect();
    Memo {
        tips,
        ..Memo::default()
    }
}

/// Whether `git rev-list <commit>..HEAD -- <paths>` in `root` prints anything (trigger
/// liveness). A git failure, an empty commit or one that would read as a git option is "not
/// triggered".
pub fn triggered_since(root: &Path, commit: &str, paths: &[String]) -> bool {
    ask(root, commit, "HEAD", paths) == Range::Touched
}

/// Whether a commit since `verified_at_sha` up to `reference` touched `paths`, for 0.1.29's
/// diff-aware staleness: a git failure (an unknown commit) counts as touched.
pub fn touched_since_verified(
    root: &Path,
    verified: &str,
    reference: &str,
    paths: &[String],
) -> bool {
    ask(root, verified, reference, paths) != Range::Untouched
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_bad_base_or_no_repository_fails() {
        let nowhere = Path::new("/nonexistent");
        assert_eq!(ask(nowhere, "", "HEAD", &[]), Range::Failed);
        assert_eq!(
            ask(nowhere, "--output=/nonexistent/x", "HEAD", &[]),
            Range::Failed
        );
        assert_eq!(
            ask(nowhere, &"f".repeat(40), "HEAD", &["src".into()]),
            Range::Failed
        );
    }

    /// A repository (its root `sub` levels below the top) and a commit helper: `commit(files)`
    /// writes each file (relative to the top) and commits.
    fn repo(sub: &str) -> (tempfile::TempDir, PathBuf, impl Fn(&[&str]) -> String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let top = dir.path().to_path_buf();
        let run = {
            let top = top.clone();
            move |args: &[&str]| -> String {
                let out = Command::new("git")
                    .arg("-C")
                    .arg(&top)
                    .args(args)
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .output()
                    .expect("git");
                assert!(out.status.success(), "git {args:?}");
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            }
        };
        run(&["init", "-q", "-b", "main"]);
        run(&["config", "user.name", "t"]);
        run(&["config", "user.email", "t@example.invalid"]);
        let root = top.join(sub);
        std::fs::create_dir_all(&root).expect("root");
        let commit = move |files: &[&str]| -> String {
            for f in files {
                let p = top.join(f);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                let n = std::fs::read_to_string(&p).unwrap_or_default();
                std::fs::write(&p, format!("{n}x")).expect("write");
            }
            run(&["add", "-A"]);
            run(&["commit", "-q", "--allow-empty", "-m", "c"]);
            run(&["rev-parse", "HEAD"])
        };
        (dir, root, commit)
    }

    fn carried_answers_equal_what_git_says(sub: &str, prefix: &str) {
        let (_dir, root, commit) = repo(sub);
        let at = |f: &str| format!("{prefix}{f}");
        let c1 = commit(&[&at("db/schema.sql"), &at("api/routes.rs")]);
        let c2 = commit(&[&at("README"), "outside/db/schema.sql"]);
        let old = commit(&[&at("api/routes.rs")]);
        let triggers: Vec<Vec<String>> = [
            vec!["db/schema.sql"],
            vec!["api"],
            vec!["*.sql"],
            vec!["README", "docs"],
            vec!["nothing/here"],
            vec![],
        ]
        .iter()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .collect();
        let mut memo = Answers::default();
        for c in [&c1, &c2, &old] {
            for p in &triggers {
                memo.entry(c.clone())
                    .or_default()
                    .insert(p.clone(), ask(&root, c, &old, p));
            }
        }
        memo.entry("abc123".into())
            .or_default()
            .insert(vec!["x".into()], Range::Failed);
        let new = {
            commit(&["outside/db/schema.sql"]);
            commit(&[&at("db/schema.sql")]);
            commit(&[&at("docs/guide.md")])
        };
        let (carried, reachable) =
            carry(&root, &old, &new, memo.clone(), &HashSet::new()).expect("carried");
        for c in [&c1, &c2, &old] {
            for p in &triggers {
                assert_eq!(
                    carried[c.as_str()][p],
                    ask(&root, c, &new, p),
                    "base {c}, triggers {p:?}"
                );
            }
        }
        assert!(
            !carried.contains_key("abc123"),
            "an unknown commit is asked again"
        );
        // Not a fast-forward of single-parent commits: nothing is carried.
        for c in [&c1, &c2, &old, &new] {
            assert!(
                reachable.contains(c.as_str()),
                "{c} is reachable from the new tip"
            );
        }
        // Not a fast-forward of single-parent commits: nothing is carried.
        let none = HashSet::new();
        assert!(carry(&root, &new, &old, memo.clone(), &none).is_none());
        assert!(carry(&root, &old, &old, memo, &none).is_none());
    }

    #[test]
    fn carried_answers_equal_what_git_says_at_the_top() {
        carried_answers_equal_what_git_says("", "");
    }

    #[test]
    fn carried_answers_equal_what_git_says_in_a_subdirectory_store() {
        carried_answers_equal_what_git_says("proj", "proj/");
    }

    #[test]
    fn a_base_ahead_of_the_new_tip_is_never_carried() {
        let (_dir, root, commit) = repo("");
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(&root)
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .expect("git")
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        let old = commit(&["a"]);
        let n1 = commit(&["b"]);
        let ahead = commit(&["a"]);
        // HEAD goes back to `old`; then fast-forwards to `n1`, which `ahead` descends from.
        run(&["reset", "-q", "--hard", &old]);
        // `ahead..n1` is empty though `n1` changed `b`: carrying would wrongly say touched.
        let paths = vec!["b".to_string()];
        assert_eq!(ask(&root, &ahead, &n1, &paths), Range::Untouched);
        let mut memo = Answers::default();
        memo.entry(ahead.clone())
            .or_default()
            .insert(paths.clone(), ask(&root, &ahead, &old, &paths));
        assert!(carry(&root, &old, &n1, memo, &HashSet::new()).is_none());
    }

    #[test]
    fn only_commits_reachable_from_the_tip_are_remembered_so_and_carrying_on_stays_exact() {
        let (_dir, root, commit) = repo("");
        let base = commit(&["a"]);
        let side = commit(&["b"]);
        // `side` is left behind on no branch: not reachable from the tips below.
        let reset = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["reset", "-q", "--hard", &base])
            .status()
            .expect("git reset");
        assert!(reset.success());
        let old = commit(&["c"]);
        let paths: Vec<Vec<String>> = vec![vec!["a".into()], vec!["b".into()], vec!["c".into()]];
        let mut memo = Answers::default();
        for b in [&base, &side, &old] {
            for p in &paths {
                memo.entry(b.clone())
                    .or_default()
                    .insert(p.clone(), ask(&root, b, &old, p));
            }
        }
        let new = commit(&["a"]);
        let (carried, reachable) =
            carry(&root, &old, &new, memo, &HashSet::new()).expect("carried");
        for c in [&base, &old, &new] {
            assert!(
                reachable.contains(c.as_str()),
                "{c} is reachable from {new}"
            );
        }
        assert!(!reachable.contains(side.as_str()), "{side} is not");
        // The next carry asks about `side` alone, and still answers as git does.
        let newer = commit(&["b"]);
        let (again, _) = carry(&root, &new, &newer, carried, &reachable).expect("carried");
        for b in [&base, &side, &old] {
            for p in &paths {
                assert_eq!(again[b.as_str()][p], ask(&root, b, &newer, p), "{b} {p:?}");
            }
        }
    }

    #[test]
    fn persisted_answers_come_back_only_whole_and_in_the_same_repository() {
        let (_dir, root, commit) = repo("");
        let c1 = commit(&["a"]);
        let c2 = commit(&["b"]);
        let results = root.join("results");
        std::fs::create_dir_all(&results).expect("results");
        let mut memo = Memo::default();
        let mut answers = Answers::default();
        let paths = vec!["a".to_string()];
        answers
            .entry(c1.clone())
            .or_default()
            .insert(paths.clone(), ask(&root, &c1, &c2, &paths));
        answers
            .entry("0".repeat(40))
            .or_default()
            .insert(paths.clone(), Range::Failed);
        memo.keep(c2.clone(), answers, true);
        persist(&root, &results, &memo);
        let mut back = restore(&root, &results);
        let got = back.take(&root, &c2);
        assert_eq!(got[&c1][&paths], Range::Untouched);
        assert!(!got.contains_key(&"0".repeat(40)), "failures are not kept");
        // A torn or edited file reads as nothing.
        let file = results.join(CACHE_FILE);
        let text = std::fs::read_to_string(&file).expect("read");
        std::fs::write(&file, text.replace("false", "true ")).expect("write");
        assert!(restore(&root, &results).take(&root, &c2).is_empty());
        std::fs::write(&file, &text[..text.len() / 2]).expect("write");
        assert!(restore(&root, &results).take(&root, &c2).is_empty());
        // Another repository (here: the same one made shallow-looking) reads as nothing.
        std::fs::write(&file, &text).expect("write");
        assert!(!restore(&root, &results).take(&root, &c2).is_empty());
        std::fs::write(root.join(".git/shallow"), format!("{c1}\n")).expect("shallow");
        assert!(restore(&root, &results).take(&root, &c2).is_empty());
    }

    #[test]
    fn a_bad_commit_or_no_repository_is_never_triggered() {
        let nowhere = Path::new("/nonexistent");
        assert!(!triggered_since(nowhere, "", &[]));
        assert!(!triggered_since(nowhere, "--output=/nonexistent/x", &[]));
        assert!(!triggered_since(nowhere, &"f".repeat(40), &["src".into()]));
    }
}
