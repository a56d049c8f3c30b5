//! What a commit would record: the paths whose staged content differs from HEAD's (what `git
//! diff --cached --name-only --no-renames` lists), read from the index file itself and compared
//! with HEAD's tree, which git is asked for (`ls-tree`) once per HEAD and kept. A pre-commit gate
//! then spawns no git of its own: the index is read in well under a millisecond, git's startup
//! costs several.
//!
//! It owns the index parser (versions 2 to 4, SHA-1 ids), the `ls-tree -r -z` parser and the
//! comparison. It must not write anything, take the caller's git environment, or guess: an
//! index it does not wholly understand (split or sparse, intent-to-add entries, a required
//! extension it does not know, another object format) answers `None`, and the caller asks git.

use std::path::Path;

/// An index or tree larger than this is left to git.
const MAX_BYTES: u64 = 32 << 20;
/// An index or tree with more entries than this is left to git: the tree is kept while its
/// store is open (about 90 bytes an entry), so a huge monorepo's would cost a daemon that runs
/// for months tens of megabytes per store for a few milliseconds per commit.
const MAX_ENTRIES: usize = 250_000;
/// The length of a SHA-1 object id, the only format read here.
const OID: usize = 20;

/// One path of HEAD's tree: where its path lies in [`HeadTree::paths`], its mode and object id.
/// Kept side by side with no allocation of its own, so that the comparison with an index walks
/// memory in order (a gate reads every entry on every commit, after an idle pause has left the
/// caches cold).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    at: u32,
    len: u32,
    mode: u32,
    oid: [u8; OID],
}

/// HEAD's tree, flattened (every blob, link and gitlink with its full path), sorted by path
/// bytes as the index is.
#[derive(Debug, Clone)]
pub struct HeadTree {
    /// The commit it is the tree of.
    pub commit: String,
    /// Every entry's path, one after the other.
    paths: Vec<u8>,
    entries: Vec<Entry>,
    /// Every directory's tree id, by path: a directory of the index whose cached tree is the
    /// same is skipped whole (see [`unchanged_dirs`]).
    dirs: std::collections::HashMap<Box<[u8]>, [u8; OID]>,
}

impl HeadTree {
    /// Ask git for the tree of `commit` (40 lowercase hex) in the repository at `root`.
    pub fn of(root: &Path, commit: &str) -> Option<HeadTree> {
        if !proto::model::is_40_lower_hex(commit) {
            return None;
        }
        let out = crate::sys::child::output(
            &mut super::run::repository_git(
                root,
                &["ls-tree", "-r", "-t", "-z", "--full-tree", "--", commit],
            ),
            crate::sys::child::git_timeout(),
        )
        .ok()?;
        if !out.status.success() || out.stdout.len() as u64 > MAX_BYTES {
            return None;
        }
        parse_ls_tree(commit, &out.stdout)
    }

    /// The tree with these entries (for tests).
    #[cfg(test)]
    fn from_ls_tree(commit: &str, bytes: &[u8]) -> Option<HeadTree> {
        parse_ls_tree(commit, bytes)
    }

    /// The path of entry `e`.
    fn path(&self, e: &Entry) -> &[u8] {
        &self.paths[e.at as usize..(e.at + e.len) as usize]
    }
}

/// `git ls-tree -r -t -z` output: `<mode> SP <type> SP <hex id> TAB <path> NUL` per entry (a
/// directory's own `tree` entry before what it holds), sorted by path bytes. `None` for
/// anything else (a SHA-256 id among them).
fn parse_ls_tree(commit: &str, bytes: &[u8]) -> Option<HeadTree> {
    let mut entries = Vec::new();
    let mut dirs = std::collections::HashMap::new();
    let mut paths = Vec::with_capacity(bytes.len() / 2);
    for rec in bytes.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let tab = rec.iter().position(|&b| b == b'\t')?;
        let (meta, path) = (&rec[..tab], &rec[tab + 1..]);
        let mut words = meta.split(|&b| b == b' ');
        let mode = std::str::from_utf8(words.next()?).ok()?;
        let kind = words.next()?;
        let hex = words.next()?;
        if words.next().is_some() || hex.len() != 2 * OID || path.is_empty() {
            return None;
        }
        let mut oid = [0u8; OID];
        for (i, pair) in hex.chunks(2).enumerate() {
            let s = std::str::from_utf8(pair).ok()?;
            oid[i] = u8::from_str_radix(s, 16).ok()?;
        }
        if kind == b"tree" {
            dirs.insert(path.into(), oid);
            if dirs.len() > MAX_ENTRIES {
                return None;
            }
            continue;
        }
        entries.push(Entry {
            at: u32::try_from(paths.len()).ok()?,
            len: u32::try_from(path.len()).ok()?,
            mode: u32::from_str_radix(mode, 8).ok()?,
            oid,
        });
        paths.extend_from_slice(path);
        if entries.len() > MAX_ENTRIES {
            return None;
        }
    }
    let mut tree = HeadTree {
        commit: commit.to_string(),
        paths,
        entries,
        dirs,
    };
    // git lists a tree in this order already; sorted anyway, since the walk depends on it.
    let mut entries = std::mem::take(&mut tree.entries);
    entries.sort_by(|a, b| tree.path(a).cmp(tree.path(b)));
    tree.entries = entries;
    Some(tree)
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at + 2)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// git's offset varint (index v4's strip length): seven bits a byte, most significant first,
/// each continuation adding one.
fn varint(b: &[u8], at: &mut usize) -> Option<usize> {
    let mut c = *b.get(*at)?;
    *at += 1;
    let mut v = usize::from(c & 0x7f);
    while c & 0x80 != 0 {
        c = *b.get(*at)?;
        *at += 1;
        v = v
            .checked_add(1)?
            .checked_mul(128)?
            .checked_add(usize::from(c & 0x7f))?;
    }
    Some(v)
}

/// The flag bits of an index entry (on disk).
const EXTENDED: u16 = 0x4000;
const STAGE_MASK: u16 = 0x3000;
const NAME_MASK: u16 = 0x0fff;
/// Of the extended flags: an entry `git add -N` made.
const INTENT_TO_ADD: u16 = 0x2000;
/// A sparse index's directory entry.
const DIR_MODE: u32 = 0o040000;

/// What lets the comparison skip a directory whole: where each index entry starts, and the
/// directories whose cached tree (the index's `TREE` extension, which `git commit` brings up to
/// date before it runs the pre-commit hook) is HEAD's tree for that directory, with how many
/// entries they hold. A gate's commit touches a few directories; the store's `ticks/` alone
/// holds an entry per decision, and is then never compared entry by entry.
struct Skips {
    starts: Vec<u32>,
    dirs: std::collections::HashMap<Vec<u8>, usize>,
}

/// The [`Skips`] of the index `b` against `tree`, for an index of version 2 or 3 whose entries
/// are all plain (stage 0, no intent-to-add, no directory entry) and whose cached tree agrees
/// with HEAD somewhere. `None` otherwise: then every entry is compared (and anything this
/// parser does not understand is refused there).
fn unchanged_dirs(b: &[u8], tree: &HeadTree) -> Option<Skips> {
    let version = be32(b, 4)?;
    if !(2..=3).contains(&version) || tree.dirs.is_empty() {
        return None;
    }
    let count = usize::try_from(be32(b, 8)?).ok()?;
    if count > MAX_ENTRIES {
        return None;
    }
    let end = b.len().checked_sub(OID)?;
    let mut starts = Vec::with_capacity(count + 1);
    let mut at = 12;
    for _ in 0..count {
        let start = at;
        starts.push(u32::try_from(start).ok()?);
        let mode = be32(b, start + 24)?;
        let flags = be16(b, start + 60)?;
        let mut name_at = start + 62;
        if flags & EXTENDED != 0 {
            if version < 3 || be16(b, name_at)? & INTENT_TO_ADD != 0 {
                return None;
            }
            name_at += 2;
        }
        let len = usize::from(flags & NAME_MASK);
        if flags & STAGE_MASK != 0 || mode & 0o170000 == DIR_MODE || len >= usize::from(NAME_MASK) {
            return None;
        }
        at = start + ((name_at - start + len + 8) & !7);
        if at > end {
            return None;
        }
    }
    starts.push(u32::try_from(at).ok()?);
    let (_, cached) = extensions(b, at)?
        .into_iter()
        .find(|(name, _)| name == b"TREE")?;
    let dirs = same_as_head(cached, tree)?;
    (!dirs.is_empty()).then_some(Skips { starts, dirs })
}

/// The extensions of the index `b` from `at` (where its entries end) to its checksum: each
/// one's name and body. `None` unless they fill that space exactly.
fn extensions(b: &[u8], mut at: usize) -> Option<Vec<(&[u8], &[u8])>> {
    let end = b.len().checked_sub(OID)?;
    let mut out = Vec::new();
    while at < end {
        let name = b.get(at..at + 4)?;
        let size = usize::try_from(be32(b, at + 4)?).ok()?;
        let next = at.checked_add(8)?.checked_add(size)?;
        out.push((name, b.get(at + 8..next)?));
        at = next;
    }
    (at == end).then_some(out)
}

/// The directories of the cached tree `body` (a `TREE` extension) that are valid and are HEAD's
/// own tree in `tree`, with how many index entries each holds.
fn same_as_head(body: &[u8], tree: &HeadTree) -> Option<std::collections::HashMap<Vec<u8>, usize>> {
    let mut dirs = std::collections::HashMap::new();
    let mut rest = body;
    let mut open: Vec<(Vec<u8>, usize)> = Vec::new();
    while !rest.is_empty() {
        // `<name> NUL <entries> SP <subtrees> LF [<id>]`, depth first.
        let nul = rest.iter().position(|&c| c == 0)?;
        let name = &rest[..nul];
        let lf = rest.iter().position(|&c| c == b'\n')?;
        let counts = std::str::from_utf8(rest.get(nul + 1..lf)?).ok()?;
        let (entries, subtrees) = counts.split_once(' ')?;
        let entries: i64 = entries.parse().ok()?;
        let subtrees: usize = subtrees.parse().ok()?;
        rest = &rest[lf + 1..];
        let id = if entries >= 0 {
            let id = rest.get(..OID)?;
            rest = &rest[OID..];
            Some(id)
        } else {
            None
        };
        // Its place: below the innermost directory still expecting subtrees.
        while open.last().is_some_and(|(_, left)| *left == 0) {
            open.pop();
        }
        let path = match open.last_mut() {
            Some((parent, left)) => {
                *left -= 1;
                let mut p = parent.clone();
                if !p.is_empty() {
                    p.push(b'/');
                }
                p.extend_from_slice(name);
                p
            }
            None if name.is_empty() => Vec::new(),
            None => return None,
        };
        if let (Some(id), Ok(n)) = (id, usize::try_from(entries)) {
            if n > 0
                && !path.is_empty()
                && tree.dirs.get(path.as_slice()).is_some_and(|h| h[..] == *id)
            {
                dirs.insert(path.clone(), n);
            }
        }
        open.push((path, subtrees));
        if dirs.len() > MAX_ENTRIES || open.len() > 4096 {
            return None;
        }
    }
    Some(dirs)
}

/// How many index entries from position `i` (whose path `path` HEAD has at `j` too) lie in a
/// directory the [`Skips`] say is unchanged and that the previous entry (`prev`) was not in:
/// the outermost such directory. HEAD must hold the same run of paths under it.
fn skippable(skips: &Skips, path: &[u8], prev: &[u8], tree: &HeadTree, j: usize) -> usize {
    for (k, _) in path.iter().enumerate().filter(|(_, &c)| c == b'/') {
        let dir = &path[..=k];
        if prev.starts_with(dir) {
            continue;
        }
        let Some(&n) = skips.dirs.get(&path[..k]) else {
            continue;
        };
        let theirs = &tree.entries;
        let last_in = theirs
            .get(j + n - 1)
            .is_some_and(|t| tree.path(t).starts_with(dir));
        let next_out = theirs
            .get(j + n)
            .is_none_or(|t| !tree.path(t).starts_with(dir));
        return if last_in && next_out { n } else { 0 };
    }
    0
}

/// The last stage-0 path of the index read so far: HEAD's entry it matched (no copy), or its
/// own.
enum Last {
    Nothing,
    Theirs(usize),
    Own(Vec<u8>),
}

/// The staged paths of the index `bytes` against `tree`: added, deleted, changed (content or
/// mode) and unmerged, sorted by path bytes, each once (git's order for `diff --cached`).
/// `None` when the index is not one this parser wholly understands.
///
/// One pass over the index beside the tree, allocating only for what it reports: a gate at
/// 10,000 committed ticks reads an index of as many entries on every commit.
fn staged_in(b: &[u8], tree: &HeadTree) -> Option<Vec<Box<[u8]>>> {
    if b.get(..4)? != b"DIRC" || b.len() < 12 + OID {
        return None;
    }
    let version = be32(b, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = usize::try_from(be32(b, 8)?).ok()?;
    if count > MAX_ENTRIES {
        return None;
    }
    let end = b.len() - OID;
    let mut at = 12;
    let mut out: Vec<Box<[u8]>> = Vec::new();
    let mut unmerged: Vec<Box<[u8]>> = Vec::new();
    // The path just read (index v4 spells each path against the one before; reused, never
    // regrown past the longest path) and the last stage-0 path (the index must be sorted, else
    // it is left to git).
    let mut path: Vec<u8> = Vec::new();
    let mut last = Last::Nothing;
    let theirs = &tree.entries;
    let mut j = 0;
    let skips = unchanged_dirs(b, tree);
    // The previous entry's path, while directories may be skipped.
    let mut prev: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < count {
        i += 1;
        let start = at;
        let mode = be32(b, start + 24)?;
        let oid: &[u8] = b.get(start + 40..start + 40 + OID)?;
        let flags = be16(b, start + 60)?;
        at = start + 62;
        if flags & EXTENDED != 0 {
            if version < 3 {
                return None;
            }
            let extended = be16(b, at)?;
            at += 2;
            if extended & INTENT_TO_ADD != 0 {
                return None;
            }
        }
        if mode & 0o170000 == DIR_MODE {
            return None;
        }
        if version == 4 {
            let strip = varint(b, &mut at)?;
            let nul = b.get(at..end)?.iter().position(|&c| c == 0)?;
            let keep = path.len().checked_sub(strip)?;
            path.truncate(keep);
            path.extend_from_slice(&b[at..at + nul]);
            at += nul + 1;
        } else {
            let name_at = at;
            let len = usize::from(flags & NAME_MASK);
            let len = if len < usize::from(NAME_MASK) {
                if b.get(name_at + len) != Some(&0) {
                    return None;
                }
                len
            } else {
                b.get(name_at..end)?.iter().position(|&c| c == 0)?
            };
            path.clear();
            path.extend_from_slice(b.get(name_at..name_at + len)?);
            // 1 to 8 NULs pad the entry to a multiple of 8 bytes.
            at = start + ((name_at - start + len + 8) & !7);
        }
        if at > end || path.is_empty() {
            return None;
        }
        if flags & STAGE_MASK != 0 {
            // Unmerged: listed once, whatever HEAD has there.
            if unmerged.last().map(|u| &u[..]) != Some(&path[..]) {
                unmerged.push(path.as_slice().into());
            }
            continue;
        }
        // The common case first: HEAD has this very path next. It is then also past the last
        // path (HEAD's entries before it are not past that one), so the index stays sorted.
        if let Some(t) = theirs.get(j).filter(|t| tree.path(t) == &path[..]) {
            if let Some(skips) = &skips {
                let n = skippable(skips, &path, &prev, tree, j);
                if n > 0 {
                    // This entry and the rest of its unchanged directory: HEAD's, one for one.
                    i += n - 1;
                    j += n;
                    at = *skips.starts.get(i)? as usize;
                    last = Last::Theirs(j - 1);
                    prev.clear();
                    prev.extend_from_slice(tree.path(&theirs[j - 1]));
                    continue;
                }
                prev.clear();
                prev.extend_from_slice(&path);
            }
            if t.mode != mode || t.oid[..] != *oid {
                out.push(path.as_slice().into());
            }
            last = Last::Theirs(j);
            j += 1;
            continue;
        }
        if skips.is_some() {
            prev.clear();
            prev.extend_from_slice(&path);
        }
        let before = match &last {
            Last::Nothing => None,
            Last::Theirs(k) => Some(tree.path(&theirs[*k])),
            Last::Own(l) => Some(l.as_slice()),
        };
        if before.is_some_and(|l| l >= path.as_slice()) {
            return None;
        }
        // What HEAD has before this path is gone from the index: deleted.
        while let Some(t) = theirs.get(j).filter(|t| tree.path(t) < path.as_slice()) {
            out.push(tree.path(t).into());
            j += 1;
        }
        match theirs.get(j) {
            Some(t) if tree.path(t) == path.as_slice() => {
                if t.mode != mode || t.oid[..] != *oid {
                    out.push(path.as_slice().into());
                }
                last = Last::Theirs(j);
                j += 1;
            }
            _ => {
                out.push(path.as_slice().into());
                match &mut last {
                    Last::Own(l) => {
                        l.clear();
                        l.extend_from_slice(&path);
                    }
                    _ => last = Last::Own(path.clone()),
                }
            }
        }
    }
    // Extensions: an optional one (its name starts with an upper-case letter) may be skipped;
    // a required one (a split index's `link`, a sparse index's `sdir`) changes what the
    // entries mean.
    if !extensions(b, at)?
        .iter()
        .all(|(name, _)| name[0].is_ascii_uppercase())
    {
        return None;
    }
    out.extend(theirs[j..].iter().map(|t| tree.path(t).into()));
    out.extend(unmerged);
    out.sort();
    out.dedup();
    Some(out)
}

/// The staged paths of the index file at `index` against `tree`, as text (lossy, as evctl reads
/// git's own answer). `None` when the file cannot be read as a regular file within the limit
/// or is not an index this parser wholly understands.
pub fn staged(index: &Path, tree: &HeadTree) -> Option<Vec<String>> {
    // The thread that answers a store's requests keeps the buffer between commits (an index of
    // 10,000 entries is about a megabyte, read fresh on each): while it stays under this size.
    const KEEP: usize = 8 << 20;
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUFFER.with(|b| {
        let mut bytes = b.borrow_mut();
        let read = crate::sys::fsio::read_followed_into(index, MAX_BYTES, &mut bytes);
        let answer = read
            .ok()
            .and_then(|()| staged_in(&bytes, tree))
            .map(|paths| {
                paths
                    .iter()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect()
            });
        if bytes.capacity() > KEEP {
            *bytes = Vec::new();
        }
        answer
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::git::test_git::{command, git_raw as git};

    fn head(dir: &Path) -> HeadTree {
        let sha = String::from_utf8(git(dir, &["rev-parse", "HEAD"])).unwrap();
        HeadTree::of(dir, sha.trim()).expect("the tree of HEAD")
    }

    /// What git itself says is staged.
    fn git_says(dir: &Path) -> Vec<String> {
        let out = git(
            dir,
            &["diff", "--cached", "--name-only", "-z", "--no-renames"],
        );
        out.split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    }

    fn ours(dir: &Path) -> Option<Vec<String>> {
        staged(&dir.join(".git/index"), &head(dir))
    }

    fn write(dir: &Path, path: &str, text: &str) {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn repo(version: &str) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        git(d, &["init", "-q", "-b", "main"]);
        git(d, &["config", "index.version", version]);
        for (p, s) in [
            ("a.txt", "a"),
            ("db/schema.sql", "1"),
            ("db/seed.sql", "s"),
            ("db-x/y", "y"),
            ("deep/er/still/file.rs", "f"),
            ("z", "z"),
        ] {
            write(d, p, s);
        }
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "one"]);
        t
    }

    #[test]
    fn nothing_staged_after_a_commit_in_every_index_version() {
        for v in ["2", "3", "4"] {
            let t = repo(v);
            assert_eq!(ours(t.path()), Some(vec![]), "index v{v}");
        }
    }

    #[test]
    fn added_changed_deleted_and_mode_changes_are_what_git_lists() {
        use std::os::unix::fs::PermissionsExt;
        for v in ["2", "3", "4"] {
            let t = repo(v);
            let d = t.path();
            write(d, "db/schema.sql", "2");
            write(d, "db/new.sql", "n");
            std::fs::remove_file(d.join("db/seed.sql")).unwrap();
            std::fs::set_permissions(d.join("z"), std::fs::Permissions::from_mode(0o755)).unwrap();
            write(d, "untracked.txt", "u");
            git(d, &["add", "db", "z"]);
            // A path too long for its length to fit the entry's flags (git then scans for
            // its end): staged without a file, as no filesystem holds one that long.
            let long = format!("{}long.txt", "l/".repeat(2100));
            let blob = String::from_utf8(git(d, &["hash-object", "-w", "a.txt"])).unwrap();
            let info = format!("100644,{},{long}", blob.trim());
            git(d, &["update-index", "--add", "--cacheinfo", &info]);
            let said = ours(d).expect("an index this parser reads");
            assert_eq!(said, git_says(d), "index v{v}");
            assert!(said.contains(&"db/schema.sql".to_string()));
            assert!(said.contains(&long));
            assert!(!said.contains(&"untracked.txt".to_string()));
        }
    }

    #[test]
    fn directories_whose_cached_tree_is_heads_are_skipped_whole_and_the_answer_is_gits() {
        for v in ["2", "3", "4"] {
            let t = repo(v);
            let d = t.path();
            // A commit leaves every cached tree valid; `git add` of one file invalidates its
            // directories only.
            write(d, "db/schema.sql", "2");
            write(d, "deep/er/new.rs", "n");
            git(d, &["add", "db/schema.sql", "deep/er/new.rs"]);
            let bytes = std::fs::read(d.join(".git/index")).unwrap();
            let tree = head(d);
            let skips = unchanged_dirs(&bytes, &tree);
            if v == "4" {
                assert!(skips.is_none(), "index v4 is compared entry by entry");
            } else {
                let skips = skips.expect("unchanged directories");
                let mut dirs: Vec<_> = skips
                    .dirs
                    .keys()
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .collect();
                dirs.sort();
                assert_eq!(dirs, ["db-x", "deep/er/still"], "index v{v}");
            }
            let said = ours(d).expect("read");
            assert_eq!(said, git_says(d), "index v{v}");
            assert_eq!(said, ["db/schema.sql", "deep/er/new.rs"], "index v{v}");
            // Staged again after a change inside a skipped directory: never skipped then.
            write(d, "db-x/y", "changed");
            git(d, &["add", "db-x/y"]);
            assert_eq!(ours(d), Some(git_says(d)), "index v{v}");
            // A commit with everything in place: nothing staged, every directory skipped.
            git(d, &["commit", "-qm", "two"]);
            assert_eq!(ours(d), Some(vec![]), "index v{v}");
            // A deletion at the start of a directory HEAD still has.
            std::fs::remove_file(d.join("db-x/y")).unwrap();
            git(d, &["add", "-A", "db-x"]);
            assert_eq!(ours(d), Some(git_says(d)), "index v{v}");
        }
    }

    #[test]
    fn an_unmerged_path_is_listed_once() {
        let t = repo("2");
        let d = t.path();
        git(d, &["checkout", "-q", "-b", "side"]);
        write(d, "a.txt", "side");
        git(d, &["commit", "-qam", "side"]);
        git(d, &["checkout", "-q", "main"]);
        write(d, "a.txt", "main");
        git(d, &["commit", "-qam", "main"]);
        // With the identity every git call here has: without one (CI runs with no global
        // config) git refuses the merge before it ever conflicts.
        let merge = command(d, &["merge", "-q", "side"]).output().unwrap();
        assert!(!merge.status.success(), "the merge conflicts");
        let said = String::from_utf8_lossy(&merge.stdout);
        assert!(said.contains("CONFLICT"), "git merge: {merge:?}");
        assert_eq!(ours(d), Some(git_says(d)));
        assert_eq!(ours(d), Some(vec!["a.txt".to_string()]));
    }

    #[test]
    fn an_index_it_does_not_wholly_understand_is_left_to_git() {
        // Intent to add.
        let t = repo("3");
        let d = t.path();
        write(d, "later.txt", "l");
        git(d, &["add", "-N", "later.txt"]);
        assert_eq!(ours(d), None);
        // A split index.
        let t = repo("2");
        let d = t.path();
        git(d, &["update-index", "--split-index"]);
        write(d, "a.txt", "b");
        git(d, &["add", "a.txt"]);
        assert_eq!(ours(d), None);
        // Not an index at all, a truncated one, a FIFO.
        let t = repo("2");
        let d = t.path();
        let tree = head(d);
        let bytes = std::fs::read(d.join(".git/index")).unwrap();
        for n in [0, 4, 12, 40, bytes.len() - 21] {
            assert_eq!(staged_in(&bytes[..n], &tree), None, "cut at {n}");
        }
        assert_eq!(staged_in(b"not an index at all, clearly", &tree), None);
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(staged(&fifo, &tree), None);
    }

    #[test]
    fn a_tree_of_another_object_format_is_refused() {
        let line = format!("100644 blob {}\tpath\0", "ab".repeat(32));
        assert!(HeadTree::from_ls_tree("x", line.as_bytes()).is_none());
        let line = format!("100644 blob {}\tpath\0", "ab".repeat(20));
        assert!(HeadTree::from_ls_tree("x", line.as_bytes()).is_some());
    }
}
