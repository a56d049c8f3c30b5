//! Receipts as git notes: the notes ref that carries run receipts between hosts, read and
//! written with git's plumbing. A note is attached to the commit its receipts were run at and
//! holds those receipts, one canonical line each, sorted and unique (so a union of two notes is
//! a union of lines). The notes commit that first adds a line says who published it: the
//! `Ev-Host:` trailer of its message and its author's email.
//!
//! Owns: the ref names ([`NOTES_REF`], [`remote_notes_ref`]), reading a notes tree
//! ([`notes_of`]), who introduced which line ([`introductions`]), writing a notes commit
//! ([`write_commit`], one `git fast-import` whatever the count) and moving the ref only from the
//! value it was read at ([`update_ref`]). It must not decide what is trusted or imported (that
//! is `verbs::receipts`), run the network (fetch and push are the client's), or touch any ref
//! but the notes refs.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use crate::engine::receipts::{self, Receipt};
use crate::git::run::repository_git;
use crate::sys::child;

/// The notes ref receipts are published under (the same name on every clone and remote).
pub const NOTES_REF: &str = "refs/notes/evolving-receipts";
/// Where a fetch keeps each remote's copy of [`NOTES_REF`]: `<prefix><remote>/receipts`.
pub const REMOTE_NOTES_PREFIX: &str = "refs/evolving/remote-notes/";
/// The trailer naming the host that published a notes commit.
pub const HOST_TRAILER: &str = "Ev-Host";
/// The most notes (annotated commits) one notes tree may hold.
pub const MAX_NOTES: usize = 200_000;
/// The most bytes the notes of one tree may hold together (10,000 receipts are about 2 MiB):
/// a hostile remote must not make a daemon that runs for months hold gigabytes.
pub const MAX_NOTES_BYTES: usize = 64 * 1024 * 1024;
/// The most bytes one git answer here may be (a tree listing, a history, the blobs).
const MAX_ANSWER: usize = 2 * MAX_NOTES_BYTES;

/// The ref a fetch from `remote` keeps that remote's notes in.
pub fn remote_notes_ref(remote: &str) -> String {
    format!("{REMOTE_NOTES_PREFIX}{remote}/receipts")
}

/// The refspec that brings `remote`'s notes with every `git fetch` (forced: the remote's copy
/// is only ever read, and a rewrite there is found by comparing with what was seen before). A
/// pattern, so that a fetch from a remote that holds no notes yet matches nothing rather than
/// failing.
pub fn fetch_refspec(remote: &str) -> String {
    format!("+{NOTES_REF}*:{}*", remote_notes_ref(remote))
}

fn is_hex40(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Every notes ref there is: this clone's [`NOTES_REF`] and each remote's copy, with its commit.
pub fn tips(root: &Path) -> Result<Vec<(String, String)>, String> {
    let out = run(
        root,
        &[
            "for-each-ref",
            "--format=%(objectname) %(objecttype) %(refname)",
            NOTES_REF,
            REMOTE_NOTES_PREFIX,
        ],
        Vec::new(),
    )?;
    let mut tips = Vec::new();
    for line in String::from_utf8_lossy(&out).lines() {
        let mut it = line.splitn(3, ' ');
        let (Some(sha), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let ours = name == NOTES_REF
            || (name.starts_with(REMOTE_NOTES_PREFIX) && name.ends_with("/receipts"));
        if ours && kind == "commit" && is_hex40(sha) {
            tips.push((name.to_string(), sha.to_string()));
        }
    }
    Ok(tips)
}

/// Run git about the repository with `input` on stdin; its stdout, or what it said on failure.
fn run(root: &Path, args: &[&str], input: Vec<u8>) -> Result<Vec<u8>, String> {
    crate::git::run::git_fed(root, args, input, MAX_ANSWER)
}

/// The contents of `blobs`, by id, through one `git cat-file --batch`; a blob that is missing
/// or too big is left out. At most [`MAX_NOTES_BYTES`] in all.
fn blobs(root: &Path, ids: &BTreeSet<String>) -> Result<HashMap<String, Vec<u8>>, String> {
    let mut input = Vec::with_capacity(ids.len() * 41);
    for id in ids {
        input.extend_from_slice(id.as_bytes());
        input.push(b'\n');
    }
    let out = run(root, &["cat-file", "--batch"], input)?;
    let mut found = HashMap::new();
    let mut at = 0;
    let mut total = 0usize;
    while at < out.len() {
        let Some(nl) = out[at..].iter().position(|&b| b == b'\n') else {
            break;
        };
        let header = String::from_utf8_lossy(&out[at..at + nl]).into_owned();
        at += nl + 1;
        let mut it = header.split(' ');
        let (Some(id), Some(kind), Some(len)) = (it.next(), it.next(), it.next()) else {
            continue; // "<id> missing"
        };
        let Ok(len) = len.parse::<usize>() else {
            return Err(format!("git cat-file said {header:?}"));
        };
        let Some(body) = out.get(at..at + len) else {
            return Err("git cat-file's answer was cut short".into());
        };
        at += len + 1;
        total += len;
        if total > MAX_NOTES_BYTES {
            return Err(format!(
                "the notes hold more than {} MiB",
                MAX_NOTES_BYTES / (1024 * 1024)
            ));
        }
        if kind == "blob" {
            found.insert(id.to_string(), body.to_vec());
        }
    }
    Ok(found)
}

/// One note's lines that are receipts run at `commit` (the commit the note is attached to),
/// canonical; the others are counted in `refused` (a forged or misplaced line never comes in).
pub fn receipt_lines(commit: &str, body: &[u8], refused: &mut usize) -> BTreeSet<String> {
    let mut lines = BTreeSet::new();
    for raw in String::from_utf8_lossy(body).lines() {
        if raw.trim().is_empty() {
            continue;
        }
        match receipts::parse_line(raw) {
            Ok(r) if r.commit == commit => {
                lines.insert(r.line());
            }
            _ => *refused += 1,
        }
    }
    lines
}

/// The notes of the notes commit `tip`: annotated commit → its receipt lines (canonical, each
/// ending in a newline), and how many lines were refused.
pub type Notes = BTreeMap<String, BTreeSet<String>>;

/// Read the notes tree of `tip` (whatever its fanout).
pub fn notes_of(root: &Path, tip: &str) -> Result<(Notes, usize), String> {
    let listing = run(
        root,
        &["ls-tree", "-r", "-z", "--full-tree", tip],
        Vec::new(),
    )?;
    let mut by_blob: Vec<(String, String)> = Vec::new();
    for entry in listing.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        let mut it = meta.split(' ');
        let (Some(_mode), Some("blob"), Some(blob)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let object: String = path.chars().filter(|&c| c != '/').collect();
        if is_hex40(&object) {
            by_blob.push((object, blob.to_string()));
        }
        if by_blob.len() > MAX_NOTES {
            return Err(format!("the notes tree holds more than {MAX_NOTES} notes"));
        }
    }
    let ids: BTreeSet<String> = by_blob.iter().map(|(_, b)| b.clone()).collect();
    let bodies = blobs(root, &ids)?;
    let mut notes = Notes::new();
    let mut refused = 0;
    for (object, blob) in by_blob {
        if let Some(body) = bodies.get(&blob) {
            let lines = receipt_lines(&object, body, &mut refused);
            if !lines.is_empty() {
                notes.entry(object).or_default().extend(lines);
            }
        }
    }
    Ok((notes, refused))
}

/// Who published a line: the notes commit that first added it, the host its message names
/// (`Ev-Host:`, `None` for a note written by other means) and its author's email.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Introduced {
    pub notes_commit: String,
    pub host: Option<String>,
    pub by: String,
}

/// What git reports of each of `commits`' signatures: `%G?` and, for a good one (`G`, `U`),
/// the names it goes by (key fingerprint, primary key fingerprint, signer, key id: `%GF`,
/// `%GP`, `%GS`, `%GK`, those git gives). Verifying uses the repository's own settings (for
/// SSH, `gpg.ssh.allowedSignersFile`); a commit git cannot verify reads as unsigned (`N`).
pub fn signatures(
    root: &Path,
    commits: &[String],
) -> Result<HashMap<String, (String, Vec<String>)>, String> {
    let mut found = HashMap::new();
    // A few hundred at a time: each signature checked is a gpg or ssh-keygen process.
    for chunk in commits.chunks(256) {
        let mut args: Vec<&str> = vec![
            "log",
            "--no-walk=unsorted",
            "--format=%x01%H%x02%G?%x02%GF%x02%GP%x02%GS%x02%GK",
        ];
        args.extend(chunk.iter().map(String::as_str));
        args.push("--");
        let out = run(root, &args, Vec::new())?;
        let text = String::from_utf8_lossy(&out);
        for rec in text.split('\u{1}').filter(|r| !r.trim().is_empty()) {
            let f: Vec<&str> = rec.trim_end_matches('\n').split('\u{2}').collect();
            let (Some(sha), Some(status)) = (f.first(), f.get(1)) else {
                continue;
            };
            let good = matches!(*status, "G" | "U");
            let names: Vec<String> = if good {
                f[2..]
                    .iter()
                    .map(|n| n.trim())
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect()
            } else {
                Vec::new()
            };
            found.insert(sha.trim().to_string(), (status.to_string(), names));
        }
    }
    Ok(found)
}

/// A note a commit changed: the annotated object, its blob before and after.
type Changed = (String, String, String);

/// For each line added by a non-merge notes commit reachable from `tips` but not from `seen`,
/// the oldest commit that added it. Merge commits add nothing of their own (they are unions).
pub fn introductions(
    root: &Path,
    tips: &[String],
    seen: &[String],
) -> Result<HashMap<String, Introduced>, String> {
    if tips.is_empty() {
        return Ok(HashMap::new());
    }
    let mut args: Vec<&str> = vec![
        "log",
        "--no-merges",
        "-r",
        "--raw",
        "--no-abbrev",
        "--no-renames",
        "--format=%x01%H %ae%x02%(trailers:key=Ev-Host,valueonly,separator=%x2C)%x03",
    ];
    args.extend(tips.iter().map(String::as_str));
    if !seen.is_empty() {
        args.push("--not");
        args.extend(seen.iter().map(String::as_str));
    }
    args.push("--");
    let out = run(root, &args, Vec::new())?;
    let text = String::from_utf8_lossy(&out);
    // Each commit with the notes it changed, newest first.
    let mut commits: Vec<(Introduced, Vec<Changed>)> = Vec::new();
    for chunk in text.split('\u{1}').filter(|c| !c.trim().is_empty()) {
        let Some((head, rest)) = chunk.split_once('\u{2}') else {
            continue;
        };
        let Some((trailer, raw)) = rest.split_once('\u{3}') else {
            continue;
        };
        let Some((sha, by)) = head.split_once(' ') else {
            continue;
        };
        let host = trailer
            .split(',')
            .map(str::trim)
            .find(|h| !h.is_empty())
            .map(str::to_string);
        let mut changed = Vec::new();
        for line in raw.lines() {
            // :<old mode> <new mode> <old blob> <new blob> <status>\t<path>
            let Some((meta, path)) = line.strip_prefix(':').and_then(|l| l.split_once('\t')) else {
                continue;
            };
            let f: Vec<&str> = meta.split(' ').collect();
            if f.len() < 5 {
                continue;
            }
            let object: String = path.chars().filter(|&c| c != '/').collect();
            if is_hex40(&object) && !f[3].bytes().all(|b| b == b'0') {
                changed.push((object, f[2].to_string(), f[3].to_string()));
            }
        }
        commits.push((
            Introduced {
                notes_commit: sha.to_string(),
                host,
                by: by.to_string(),
            },
            changed,
        ));
    }
    let ids: BTreeSet<String> = commits
        .iter()
        .flat_map(|(_, c)| c.iter().flat_map(|(_, o, n)| [o.clone(), n.clone()]))
        .filter(|b| !b.bytes().all(|x| x == b'0'))
        .collect();
    let bodies = blobs(root, &ids)?;
    let empty = Vec::new();
    let mut found: HashMap<String, Introduced> = HashMap::new();
    // Oldest first, so the first to add a line keeps it.
    for (who, changed) in commits.into_iter().rev() {
        for (object, old, new) in changed {
            let mut refused = 0;
            let before = receipt_lines(&object, bodies.get(&old).unwrap_or(&empty), &mut refused);
            let after = receipt_lines(&object, bodies.get(&new).unwrap_or(&empty), &mut refused);
            for line in after.difference(&before) {
                found.entry(line.clone()).or_insert_with(|| who.clone());
            }
        }
    }
    Ok(found)
}

/// Whether commit `a` is an ancestor of (or is) `b`; `None` when git cannot tell.
pub fn is_ancestor(root: &Path, a: &str, b: &str) -> Option<bool> {
    let out = child::output(
        &mut repository_git(root, &["merge-base", "--is-ancestor", a, b]),
        child::git_timeout(),
    )
    .ok()?;
    match out.status.code() {
        Some(0) => Some(true),
        Some(1) => Some(false),
        _ => None,
    }
}

/// The commits of `head`'s history, at most `limit` of them (the newest).
pub fn history(root: &Path, head: &str, limit: usize) -> Result<HashSet<String>, String> {
    let max = format!("--max-count={limit}");
    let out = run(root, &["rev-list", &max, head, "--"], Vec::new())?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| is_hex40(l))
        .map(str::to_string)
        .collect())
}

/// Which of `commits` are objects of this repository.
pub fn existing(root: &Path, commits: &BTreeSet<String>) -> Result<HashSet<String>, String> {
    let mut input = Vec::new();
    for c in commits {
        input.extend_from_slice(c.as_bytes());
        input.push(b'\n');
    }
    let out = run(
        root,
        &["cat-file", "--batch-check=%(objectname) %(objecttype)"],
        input,
    )?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| l.strip_suffix(" commit"))
        .map(str::to_string)
        .collect())
}

/// A notes commit to write: its parents, its notes, and who writes it.
pub struct NewCommit<'a> {
    pub parents: &'a [String],
    pub notes: &'a Notes,
    pub message: &'a str,
    /// `Name <email>` of the author and committer.
    pub ident: &'a str,
}

/// The path of a note in the tree: two-level fanout, as git itself settles on for many notes.
fn note_path(object: &str) -> String {
    format!("{}/{}", &object[..2], &object[2..])
}

/// Write `c` as a commit (the whole tree, so any fanout the parents used is made uniform) and
/// return its id. No ref is moved: the commit is written under a scratch ref of this process,
/// read back and the scratch ref removed.
pub fn write_commit(root: &Path, c: &NewCommit) -> Result<String, String> {
    use std::io::Write;
    let scratch = format!(
        "refs/evolving/tmp/notes-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut s: Vec<u8> = Vec::new();
    let _ = writeln!(s, "commit {scratch}");
    let _ = writeln!(s, "author {} {now} +0000", c.ident);
    let _ = writeln!(s, "committer {} {now} +0000", c.ident);
    let _ = writeln!(s, "data {}", c.message.len());
    s.extend_from_slice(c.message.as_bytes());
    s.push(b'\n');
    for (i, p) in c.parents.iter().enumerate() {
        if !is_hex40(p) {
            return Err(format!("not a commit id: {p:?}"));
        }
        let _ = writeln!(s, "{} {p}", if i == 0 { "from" } else { "merge" });
    }
    s.extend_from_slice(b"deleteall\n");
    for (object, lines) in c.notes {
        if !is_hex40(object) || lines.is_empty() {
            continue;
        }
        let body: String = lines.iter().map(String::as_str).collect();
        let _ = writeln!(s, "M 100644 inline {}", note_path(object));
        let _ = writeln!(s, "data {}", body.len());
        s.extend_from_slice(body.as_bytes());
        s.push(b'\n');
    }
    s.extend_from_slice(b"done\n");
    let mut cmd = repository_git(root, &["fast-import", "--quiet", "--done"]);
    // fast-import grows its pool in small steps; a bigger first step halves its time here.
    cmd.env("MALLOC_TOP_PAD_", "134217728");
    let out = child::output_with_input(&mut cmd, s, child::git_timeout(), MAX_ANSWER)
        .map_err(|e| e.to_string())?;
    let made = crate::git::run::git(root, &["rev-parse", "--verify", "-q", &scratch]);
    let _ = run(root, &["update-ref", "-d", &scratch], Vec::new());
    if !out.status.success() {
        return Err(format!(
            "git fast-import failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    made.filter(|m| is_hex40(m))
        .ok_or_else(|| "git fast-import wrote no commit".to_string())
}

/// Move `name` to `new` only if it still is `old` (`None`: only if it does not exist yet).
pub fn update_ref(root: &Path, name: &str, new: &str, old: Option<&str>) -> Result<(), String> {
    let zero = "0".repeat(40);
    let old = old.unwrap_or(&zero);
    run(
        root,
        &["update-ref", "-m", "evctl receipts", name, new, old],
        Vec::new(),
    )
    .map(|_| ())
}

/// The notes of all `tips` together: the union of every note's lines.
pub fn union(root: &Path, tips: &[String]) -> Result<(Notes, usize), String> {
    let mut all = Notes::new();
    let mut refused = 0;
    for tip in tips {
        let (notes, r) = notes_of(root, tip)?;
        refused += r;
        for (object, lines) in notes {
            all.entry(object).or_default().extend(lines);
        }
    }
    Ok((all, refused))
}

/// A receipt line's receipt (lines here were parsed when read, so this only fails on a bug).
pub fn receipt_of(line: &str) -> Option<Receipt> {
    receipts::parse_line(line.trim_end()).ok()
}

/// git's common directory for the repository at `root` (where refs live): `.git` itself in a
/// plain repository, else git's answer.
pub fn common_dir(root: &Path) -> Option<std::path::PathBuf> {
    if let Some(d) = crate::git::worktree::plain_git_dir(root) {
        return Some(d);
    }
    let said = crate::git::run::git(root, &["rev-parse", "--git-common-dir"])?;
    let p = std::path::PathBuf::from(said);
    Some(if p.is_absolute() { p } else { root.join(p) })
}

/// What the notes refs look like to `stat`: the packed refs, this clone's notes ref and every
/// remote's copy (a fetch or publish that moves one changes it). `None` when a file changed
/// too recently for its stamp to be trusted (the refs are then read again next time).
pub fn refs_stamp(common: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let racy = 100_000_000i128;
    let mut stamp = String::new();
    let mut fresh = false;
    let mut add = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => {
            let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
            let changed = ns(m.mtime(), m.mtime_nsec()).max(ns(m.ctime(), m.ctime_nsec()));
            fresh |= now - changed < racy;
            stamp.push_str(&format!(
                "{}:{}:{}:{}:{};",
                m.ino(),
                m.len(),
                changed,
                m.dev(),
                m.mode()
            ));
        }
        Err(_) => stamp.push_str("-;"),
    };
    add(&common.join("packed-refs"));
    add(&common.join(NOTES_REF));
    let remotes = common.join(REMOTE_NOTES_PREFIX.trim_end_matches('/'));
    add(&remotes);
    if let Ok(rd) = std::fs::read_dir(&remotes) {
        let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for n in names.iter().take(256) {
            add(&remotes.join(n));
            add(&remotes.join(n).join("receipts"));
        }
    }
    (!fresh).then_some(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::git::test_git::git;

    fn receipt(commit: &str, test: &str, result: &str) -> String {
        format!(
            "{{\"commit\":\"{commit}\",\"platform\":\"linux-ci\",\"ran_at\":\"2026-11-29T00:00:00Z\",\"result\":\"{result}\",\"test\":\"{test}\"}}\n"
        )
    }

    #[test]
    fn written_notes_read_back_and_name_who_added_each_line() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path();
        git(d, &["init", "-q", "-b", "main"]);
        git(d, &["commit", "-q", "--allow-empty", "-m", "one"]);
        let c1 = git(d, &["rev-parse", "HEAD"]);
        git(d, &["commit", "-q", "--allow-empty", "-m", "two"]);
        let c2 = git(d, &["rev-parse", "HEAD"]);
        let mut notes = Notes::new();
        notes
            .entry(c1.clone())
            .or_default()
            .insert(receipt(&c1, "true", "green"));
        let first = write_commit(
            d,
            &NewCommit {
                parents: &[],
                notes: &notes,
                message: "one\n\nEv-Host: ci-1\n",
                ident: "ci-1 <ci@example.invalid>",
            },
        )
        .expect("written");
        update_ref(d, NOTES_REF, &first, None).expect("created");
        assert!(
            update_ref(d, NOTES_REF, &first, None).is_err(),
            "a ref that moved is never overwritten"
        );
        // git itself reads the note.
        assert_eq!(
            git(d, &["notes", "--ref=evolving-receipts", "show", &c1]),
            receipt(&c1, "true", "green").trim()
        );
        notes
            .entry(c2.clone())
            .or_default()
            .insert(receipt(&c2, "false", "red"));
        // A forged line (a receipt of another commit) is refused when read.
        notes
            .entry(c2.clone())
            .or_default()
            .insert(receipt(&c1, "x", "green"));
        let second = write_commit(
            d,
            &NewCommit {
                parents: std::slice::from_ref(&first),
                notes: &notes,
                message: "two\n\nEv-Host: laptop\n",
                ident: "laptop <dev@example.invalid>",
            },
        )
        .expect("written");
        update_ref(d, NOTES_REF, &second, Some(&first)).expect("moved");
        assert_eq!(
            tips(d).expect("tips"),
            vec![(NOTES_REF.to_string(), second.clone())]
        );
        let (read, refused) = notes_of(d, &second).expect("read");
        assert_eq!(refused, 1);
        assert_eq!(read.len(), 2);
        assert!(read[&c2].contains(&receipt(&c2, "false", "red")));
        let who = introductions(d, std::slice::from_ref(&second), &[]).expect("walked");
        assert_eq!(who.len(), 2, "{who:?}");
        let red = &who[&receipt(&c2, "false", "red")];
        assert_eq!(red.notes_commit, second);
        assert_eq!(red.host.as_deref(), Some("laptop"));
        assert_eq!(red.by, "dev@example.invalid");
        assert_eq!(
            who[&receipt(&c1, "true", "green")].host.as_deref(),
            Some("ci-1")
        );
        // Only what is new since a commit already walked.
        let later = introductions(
            d,
            std::slice::from_ref(&second),
            std::slice::from_ref(&first),
        )
        .expect("walked");
        assert_eq!(later.len(), 1);
        assert_eq!(is_ancestor(d, &first, &second), Some(true));
        assert_eq!(is_ancestor(d, &second, &first), Some(false));
        let h = history(d, "HEAD", 10).expect("history");
        assert!(h.contains(&c1) && h.contains(&c2));
        let wanted: BTreeSet<String> = [c1.clone(), "0".repeat(40)].into_iter().collect();
        assert_eq!(existing(d, &wanted).expect("asked"), HashSet::from([c1]));
    }
}
