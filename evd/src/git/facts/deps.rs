//! What an answer depends on, stamped before git is asked: git's discovery walk up to `.git`,
//! the repository's HEAD, its refs and config files, and for an upstream the user and system
//! config too (the list is in [`super`]'s documentation). Also the strict readers of HEAD files
//! and ref names that decide which loose ref files those are.
//!
//! It stamps and reads files, and never runs git nor keeps anything: asking git and keeping
//! answers is [`super::cache`]'s, stamps themselves are [`super::stamp`]'s.

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::env::Env;
use super::stamp::{node_of, probe, Dep, Meta, Stamp};

/// A persisted cache larger than this is not read; a config file larger than this is not
/// searched for includes (and so not trusted).
pub(super) const MAX_READ: u64 = 1 << 20;

/// The git question asked.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Query {
    /// `git rev-parse HEAD` (in [`Mode::Repository`](super::Mode::Repository): `git rev-parse --verify -q HEAD`).
    Head,
    /// `git rev-parse @{upstream}`.
    Upstream,
}

/// What is known before git is asked: the dependencies stamped so far, and the branch HEAD
/// names (`None` when detached).
pub(super) struct Plan {
    pub(super) gitdir: PathBuf,
    pub(super) head_ref: Option<String>,
    /// The object id in a detached HEAD file.
    detached_at: Option<String>,
    pub(super) deps: Vec<Dep>,
}

impl Plan {
    /// HEAD's commit as git would resolve it, read from the files this plan stamped, when that
    /// is plain: a detached HEAD, or a branch whose loose ref holds a 40-hex id. `None` sends
    /// the question to git (a packed or unborn branch, anything unusual).
    pub(super) fn head_from_files(&self) -> Option<String> {
        let id = match (&self.detached_at, &self.head_ref) {
            (Some(id), _) => id.clone(),
            (None, Some(branch)) => {
                let text = read_small(&self.gitdir.join(valid_ref(branch)?))?;
                text.strip_suffix('\n').unwrap_or(&text).to_string()
            }
            _ => return None,
        };
        proto::model::is_40_lower_hex(&id).then_some(id)
    }
}

/// Stamp what an answer to `q` in the repository around `canon` depends on, before git is
/// asked (the user and system config files, for an upstream, as `env` and `system_config`
/// say). `None` when the repository is not one whose answers we can vouch for.
pub(super) fn plan(canon: &Path, q: Query, env: &Env, system_config: &Path) -> Option<Plan> {
    let mut deps = Vec::new();
    let gitdir = discover(canon, &mut deps)?;
    if remote_fs(&gitdir) != Some(false) {
        return None;
    }
    for (name, want) in [("objects", true), ("refs", true), ("commondir", false)] {
        let p = gitdir.join(name);
        let m = probe(&p).ok()?;
        if want {
            let m = m.filter(|m| m.is_dir())?;
            deps.push(Dep::new(&p, node_of(&m))?);
        } else if m.is_some() {
            return None;
        } else {
            deps.push(Dep::new(&p, Stamp::Absent)?);
        }
    }
    // A reftable repository keeps its refs where our stamps cannot follow.
    let reftable = gitdir.join("reftable");
    if probe(&reftable).ok()?.is_some() {
        return None;
    }
    deps.push(Dep::new(&reftable, Stamp::Absent)?);
    let head = gitdir.join("HEAD");
    let m = probe(&head).ok()?.filter(|m| m.is_file())?;
    deps.push(Dep::new(&head, Stamp::File(Meta::of(&m)))?);
    let head_text = read_small(&head)?;
    let (head_ref, detached_at) = match parse_head(&head_text)? {
        HeadIs::Detached => (None, Some(head_text.trim_end().to_string())),
        HeadIs::Branch(name) => {
            // Which branch HEAD names is all an upstream depends on (the HEAD file), not
            // where the branch points: a commit leaves `@{upstream}` cached.
            if q == Query::Head {
                deps.push(loose_ref(&gitdir, &name)?);
            }
            (Some(name), None)
        }
    };
    let mut configs = vec![gitdir.join("config")];
    if q == Query::Upstream {
        configs.push(gitdir.join("config.worktree"));
        configs.extend(env.user_configs());
        configs.push(system_config.to_path_buf());
    }
    for p in [gitdir.join("packed-refs")].iter().chain(&configs) {
        deps.push(Dep::new(p, Stamp::of(p).ok()?)?);
    }
    // Includes pull in files we do not stamp. The repository format (all a HEAD needs of
    // the config) is read without them.
    if q == Query::Upstream && configs.iter().any(|p| includes_others(p) != Some(false)) {
        return None;
    }
    Some(Plan {
        gitdir,
        head_ref,
        detached_at,
        deps,
    })
}

/// Walk up from `canon` as git's discovery does, stamping each directory (by identity) and the
/// absence of `.git` and `HEAD` in it, to the first `.git`. Its path when it is a real
/// directory, on the same device, owned by us; `None` otherwise (a `.git` file or symlink, a
/// bare repository on the way, a mount crossed, no repository at all).
fn discover(canon: &Path, deps: &mut Vec<Dep>) -> Option<PathBuf> {
    let me = crate::sys::users::euid();
    let device = fs::symlink_metadata(canon).ok()?.dev();
    for dir in canon.ancestors() {
        let m = fs::symlink_metadata(dir).ok()?;
        if !m.is_dir() || m.dev() != device {
            return None;
        }
        deps.push(Dep::new(dir, node_of(&m))?);
        let dotgit = dir.join(".git");
        match probe(&dotgit).ok()? {
            None => deps.push(Dep::new(&dotgit, Stamp::Absent)?),
            Some(g) => {
                // A worktree's or submodule's `.git` file, a symlink: not ours to reason about.
                // A repository someone else owns: git consults safe.directory.
                if !g.file_type().is_dir() || g.dev() != device || g.uid() != me || m.uid() != me {
                    return None;
                }
                deps.push(Dep::new(&dotgit, node_of(&g))?);
                return Some(dotgit);
            }
        }
        // git would take a directory holding HEAD (and objects/, refs/) as a bare repository.
        let head = dir.join("HEAD");
        if probe(&head).ok()?.is_some() {
            return None;
        }
        deps.push(Dep::new(&head, Stamp::Absent)?);
    }
    None
}

/// Whether `path` is on a network or FUSE filesystem, where `stat` may answer from a client's
/// attribute cache and so prove nothing about another host's changes. `None` when unknown.
fn remote_fs(path: &Path) -> Option<bool> {
    crate::sys::filesystem::is_remote(path)
}

/// What a HEAD file says.
#[derive(Debug, PartialEq, Eq)]
enum HeadIs {
    Detached,
    Branch(String),
}

/// `ref: <name>` (a branch) or an object id (detached); `None` for anything else.
fn parse_head(text: &str) -> Option<HeadIs> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    if let Some(rest) = line.strip_prefix("ref:") {
        let name = rest.trim_start_matches([' ', '\t']);
        return Some(HeadIs::Branch(valid_ref(name)?.to_string()));
    }
    let hex = |s: &str| matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    hex(line).then_some(HeadIs::Detached)
}

/// A ref name we are willing to turn into a path under the git directory: `refs/…`, no empty,
/// dot-led or `..` components, none of the characters git forbids, not a lock file.
pub(super) fn valid_ref(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("refs/")?;
    let bad_char = |c: char| c.is_ascii_control() || " ~^:?*[\\".contains(c);
    let ok = !rest.is_empty()
        && !name.contains("..")
        && !name.contains("@{")
        && !name.ends_with(".lock")
        && !name.chars().any(bad_char)
        && name
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.'));
    ok.then_some(name)
}

/// The stamp of the loose file of ref `name`: absent (it may be packed) or a regular file that
/// is not itself a symbolic ref. `None` for anything else.
pub(super) fn loose_ref(gitdir: &Path, name: &str) -> Option<Dep> {
    let p = gitdir.join(valid_ref(name)?);
    let m = match probe(&p).ok()? {
        None => return Dep::new(&p, Stamp::Absent),
        Some(m) => m,
    };
    if !m.is_file() {
        return None;
    }
    let dep = Dep::new(&p, Stamp::File(Meta::of(&m)))?;
    // A symbolic ref in a loose file (a nested symref) leads to files we did not stamp.
    if read_small(&p)?.starts_with("ref:") {
        return None;
    }
    Some(dep)
}

/// A small file's text (following symlinks); `None` when unreadable, too large or not UTF-8.
fn read_small(path: &Path) -> Option<String> {
    let f = crate::sys::fsio::open_followed(path).ok()?;
    let mut s = String::new();
    f.take(MAX_READ + 1).read_to_string(&mut s).ok()?;
    (s.len() as u64 <= MAX_READ).then_some(s)
}

/// Whether a config file may pull in others (`include` / `includeIf`, matched loosely:
/// anywhere, any case). `Some(false)` for a missing file; `None` when it cannot be read.
fn includes_others(path: &Path) -> Option<bool> {
    match probe(path).ok()? {
        None => Some(false),
        Some(_) => {
            let f = crate::sys::fsio::open_followed(path).ok()?;
            let mut bytes = Vec::new();
            f.take(MAX_READ + 1).read_to_end(&mut bytes).ok()?;
            if bytes.len() as u64 > MAX_READ {
                return None;
            }
            bytes.make_ascii_lowercase();
            Some(bytes.windows(7).any(|w| w == b"include"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_files_and_ref_names_are_read_strictly() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(parse_head(&format!("{sha}\n")), Some(HeadIs::Detached));
        assert_eq!(
            parse_head("ref: refs/heads/main\n"),
            Some(HeadIs::Branch("refs/heads/main".into()))
        );
        assert_eq!(
            parse_head("ref:refs/heads/a/b"),
            Some(HeadIs::Branch("refs/heads/a/b".into()))
        );
        for bad in [
            "",
            "ref: HEAD\n",
            "ref: refs/heads/../../x\n",
            "ref: refs/heads/.hidden\n",
            "ref: refs/heads/x.lock\n",
            "ref: refs/heads/a b\n",
            "ref: refs/heads//x\n",
            "ref: refs/\n",
            "ref: refs/heads/main\r\n",
            "xyz\n",
            &sha[..39],
        ] {
            assert_eq!(parse_head(bad), None, "{bad:?}");
        }
    }
}
