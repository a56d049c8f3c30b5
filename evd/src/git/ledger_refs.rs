//! Each host's event ledger as a ref of its own: `refs/evolving/ledger/<host>` is a commit
//! whose tree holds that host's `events.jsonl`, each publish a child of the last, so that two
//! hosts never write the same ref and there is nothing to merge. Another host's copy comes with
//! a fetch (`refs/evolving/remotes/<remote>/ledger/<host>`) and is judged against the copy last
//! accepted from it (`refs/evolving/seen/<remote>/ledger/<host>`): it must descend from it and
//! extend its file byte for byte, else it is a rewrite, named by its first differing line.
//!
//! Owns the ref names, writing a host's ledger commit ([`publish`]), reading a copy's bytes
//! ([`ledger_bytes`]) and the judgement ([`judge`]). It must not verify the chain's rules
//! (that is [`crate::ledger`]'s), decide what to do about a rewrite, or run the network.

use std::path::Path;

use crate::git::notes::{is_ancestor, update_ref};
use crate::git::run::repository_git;
use crate::sys::child;

/// Where each host publishes its own ledger.
pub const LEDGER_PREFIX: &str = "refs/evolving/ledger/";
/// The file a ledger commit's tree holds.
pub const LEDGER_FILE: &str = "events.jsonl";
/// The largest ledger copy read (a hostile remote must not make evd hold gigabytes).
pub const MAX_LEDGER_BYTES: usize = 512 * 1024 * 1024;

/// This host's ledger ref.
pub fn ledger_ref(host: &str) -> String {
    format!("{LEDGER_PREFIX}{host}")
}

/// Where a fetch from `remote` keeps the hosts' ledgers.
pub fn remote_prefix(remote: &str) -> String {
    format!("refs/evolving/remotes/{remote}/ledger/")
}

/// The copy last accepted from `host` through `remote`.
pub fn seen_ref(remote: &str, host: &str) -> String {
    format!("refs/evolving/seen/{remote}/ledger/{host}")
}

/// The refspec that brings every host's ledger with `git fetch` (forced: the copy is judged
/// against the one last accepted, never trusted for descending from it).
pub fn fetch_refspec(remote: &str) -> String {
    format!("+{LEDGER_PREFIX}*:{}*", remote_prefix(remote))
}

fn one_line(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// The trailer of a ledger commit naming its file's last event: `<seq> <sha256 of the line>`.
pub const HEAD_TRAILER: &str = "Ev-Head";

/// Publish `bytes` as `host`'s ledger: a commit (child of `parent`, the ref's value now) whose
/// tree holds them, the ref moved only from `parent`, its message naming the last event
/// (`head`: its seq and line hash). Returns the commit.
pub fn publish(
    root: &Path,
    host: &str,
    bytes: &[u8],
    head: (u64, &str),
    parent: Option<&str>,
    ident: (&str, &str),
) -> Result<String, String> {
    let blob = one_line(crate::git::run::git_fed(
        root,
        &["hash-object", "-w", "--stdin"],
        bytes.to_vec(),
        1024,
    )?);
    let tree = one_line(crate::git::run::git_fed(
        root,
        &["mktree"],
        format!("100644 blob {blob}\t{LEDGER_FILE}\n").into_bytes(),
        1024,
    )?);
    let message = format!(
        "evctl ledger publish: {} of {host}\n\nEv-Host: {host}\n{HEAD_TRAILER}: {} {}\n",
        match bytes.iter().filter(|&&b| b == b'\n').count() {
            1 => "1 event".to_string(),
            n => format!("{n} events"),
        },
        head.0,
        head.1
    );
    let mut args = vec!["commit-tree", tree.as_str()];
    if let Some(p) = parent {
        args.push("-p");
        args.push(p);
    }
    args.push("-m");
    args.push(&message);
    let mut cmd = repository_git(root, &args);
    cmd.env("GIT_AUTHOR_NAME", ident.0)
        .env("GIT_AUTHOR_EMAIL", ident.1)
        .env("GIT_COMMITTER_NAME", ident.0)
        .env("GIT_COMMITTER_EMAIL", ident.1);
    let out = child::output_with_input(&mut cmd, Vec::new(), child::git_timeout(), 1024)
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "git commit-tree failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let commit = one_line(out.stdout);
    update_ref(root, &ledger_ref(host), &commit, parent)?;
    Ok(commit)
}

/// The ledger file a ledger commit holds.
pub fn ledger_bytes(root: &Path, commit: &str) -> Result<Vec<u8>, String> {
    let spec = format!("{commit}:{LEDGER_FILE}");
    crate::git::run::git_fed(
        root,
        &["cat-file", "blob", &spec],
        Vec::new(),
        MAX_LEDGER_BYTES,
    )
}

/// Every ledger ref of the repository: this host's published ones, the fetched copies and the
/// copies accepted, each `(commit, refname, Ev-Head trailer or "")`, in one git process.
pub fn list(root: &Path) -> Result<Vec<(String, String, String)>, String> {
    let format = format!(
        "--format=%(objectname)%09%(refname)%09%(trailers:key={HEAD_TRAILER},valueonly,separator=%x20)"
    );
    let out = crate::git::run::git_ok(
        root,
        &[
            "for-each-ref",
            &format,
            LEDGER_PREFIX,
            "refs/evolving/remotes/",
            "refs/evolving/seen/",
        ],
    )
    .ok_or_else(|| "git for-each-ref failed".to_string())?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let commit = f.next()?;
            let name = f.next()?;
            let head = f.next().unwrap_or("").trim();
            (commit.len() >= 40).then(|| (commit.to_string(), name.to_string(), head.to_string()))
        })
        .collect())
}

/// An `Ev-Head` trailer's seq and hash.
pub fn parse_head(trailer: &str) -> Option<(u64, String)> {
    let (seq, hash) = trailer.trim().split_once(' ')?;
    let hash = hash.trim();
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| Some((seq.parse().ok()?, hash.to_string())))?
}

/// How a fetched copy of a host's ledger stands against the copy last accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// Nothing was accepted from this host yet.
    First,
    /// The very copy accepted.
    Same,
    /// It descends from the accepted copy and its file extends that copy's, byte for byte.
    Extended,
    /// Anything else: history rewritten, lines changed or dropped. `line` is the first line
    /// (1-based) that differs from the accepted copy (or the first one missing).
    Rewritten { line: u64 },
}

/// Judge `new` against `seen` (the copy last accepted); the new copy's bytes come along.
pub fn judge(root: &Path, seen: Option<&str>, new: &str) -> Result<(Judged, Vec<u8>), String> {
    let bytes = ledger_bytes(root, new)?;
    let Some(seen) = seen else {
        return Ok((Judged::First, bytes));
    };
    if seen == new {
        return Ok((Judged::Same, bytes));
    }
    let old = ledger_bytes(root, seen)?;
    let descends = is_ancestor(root, seen, new) == Some(true);
    if descends && bytes.starts_with(&old) {
        return Ok((Judged::Extended, bytes));
    }
    Ok((
        Judged::Rewritten {
            line: first_difference(&old, &bytes),
        },
        bytes,
    ))
}

/// The first line (1-based) where `new` does not carry `old` on, byte for byte.
fn first_difference(old: &[u8], new: &[u8]) -> u64 {
    let mut line = 1;
    let mut o = old.split_inclusive(|&b| b == b'\n');
    let mut n = new.split_inclusive(|&b| b == b'\n');
    loop {
        match (o.next(), n.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (None, _) => return line,
            _ => return line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    use crate::git::test_git::git;

    #[test]
    fn a_ledger_that_grows_is_accepted_and_one_rewritten_names_its_first_changed_line() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path();
        git(d, &["init", "-q", "-b", "main"]);
        let who = ("laptop-1", "evd@laptop-1");
        let one = b"{\"seq\":1}\n{\"seq\":2}\n".to_vec();
        let h = "0".repeat(64);
        let first = publish(d, "laptop-1", &one, (2, &h), None, who).expect("published");
        assert_eq!(git(d, &["rev-parse", &ledger_ref("laptop-1")]), first);
        assert_eq!(ledger_bytes(d, &first).expect("read"), one);
        assert!(
            publish(d, "laptop-1", &one, (2, &h), None, who).is_err(),
            "a ref that exists is never overwritten from nothing"
        );
        let mut two = one.clone();
        two.extend_from_slice(b"{\"seq\":3}\n");
        let second = publish(d, "laptop-1", &two, (3, &h), Some(&first), who).expect("published");
        assert_eq!(judge(d, None, &second).expect("judged").0, Judged::First);
        assert_eq!(
            judge(d, Some(&second), &second).expect("judged").0,
            Judged::Same
        );
        let (j, bytes) = judge(d, Some(&first), &second).expect("judged");
        assert_eq!(j, Judged::Extended);
        assert_eq!(bytes, two);
        // A rewrite: the second line changed, published as a fresh history.
        let forged = b"{\"seq\":1}\n{\"seq\":2,\"x\":1}\n{\"seq\":3}\n".to_vec();
        let tmp = tempfile::tempdir().expect("tempdir");
        let f = tmp.path().join("events.jsonl");
        std::fs::write(&f, &forged).expect("write");
        let blob = git(d, &["hash-object", "-w", f.to_str().expect("utf-8")]);
        let tree = {
            let out = Command::new("git")
                .current_dir(d)
                .arg("mktree")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write;
                    c.stdin
                        .take()
                        .expect("stdin")
                        .write_all(format!("100644 blob {blob}\tevents.jsonl\n").as_bytes())?;
                    c.wait_with_output()
                })
                .expect("mktree");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let rewritten = git(d, &["commit-tree", &tree, "-m", "forged"]);
        let (j, _) = judge(d, Some(&second), &rewritten).expect("judged");
        assert_eq!(j, Judged::Rewritten { line: 2 });
        // Truncated, even as a child: the missing line is named.
        let cut = publish(d, "laptop-1", &one, (2, &h), Some(&second), who).expect("published");
        assert_eq!(
            judge(d, Some(&second), &cut).expect("judged").0,
            Judged::Rewritten { line: 3 }
        );
        let listed = list(d).expect("listed");
        assert_eq!(
            listed,
            vec![(cut.clone(), ledger_ref("laptop-1"), format!("2 {h}"))]
        );
        assert_eq!(parse_head(&listed[0].2), Some((2, h.clone())));
        assert_eq!(parse_head("x y"), None);
        assert_eq!(
            fetch_refspec("origin"),
            "+refs/evolving/ledger/*:refs/evolving/remotes/origin/ledger/*"
        );
    }
}
