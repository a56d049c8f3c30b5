//! The ledger file of one store, `results/ledger/events.jsonl`: read and verified line by line,
//! appended to (one `write` per batch, then `fsync`) by its only writer, the evd that owns the
//! store.
//!
//! The writer keeps the tail (the last line's seq, hash and time, and the rules' state) between
//! appends. Before each append it compares the file's stamp with the one it left: a file
//! changed by anyone else is read and verified again from the start. A batch that cannot be
//! written whole is cut back off, so an append reported as failed leaves nothing behind.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::rules::{self, Rules, Violation};
use crate::sys::beneath::{Kind, Root};

/// Where a store's ledger lives, under its `results/`.
pub const DIR: &str = "ledger";
pub const FILE: &str = "events.jsonl";
/// The chain's head, beside the file: the seq and hash of the last line evd wrote, durable with
/// each append, so that a removed or edited last line is told from a file that simply ends there.
pub const HEAD: &str = "head";
/// The head file's fixed size (rewritten in place, in one write of one block).
const HEAD_BYTES: usize = 128;

/// The last line evd wrote: its seq and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

impl Head {
    fn parse(text: &str) -> Option<Head> {
        let v: Value = serde_json::from_str(text.trim()).ok()?;
        let hash = v.get("hash")?.as_str()?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Head {
            seq: v.get("seq")?.as_u64()?,
            hash: hash.to_string(),
        })
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = serde_json::json!({"seq": self.seq, "hash": self.hash})
            .to_string()
            .into_bytes();
        b.resize(HEAD_BYTES - 1, b' ');
        b.push(b'\n');
        b
    }
}

/// The longest line the ledger takes (an event past it is refused at the door; a longer line
/// in the file is a violation).
pub const MAX_LINE: usize = 256 * 1024;

/// The first line that breaks a rule, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// 1-based.
    pub line: u64,
    pub violation: Violation,
}

/// What reading the whole file found.
#[derive(Debug, Clone)]
pub struct Read {
    /// Lines read.
    pub lines: u64,
    /// The first violation, if any (reading goes on to the end to find the tail).
    pub broken: Option<Broken>,
    pub tail: Tail,
    /// The last line as it is (without its newline).
    pub last_line: Option<String>,
    /// The file does not end with a newline (a torn last line): the next append ends it first.
    pub torn: bool,
    /// Only the last line was read (for evd's own events): `lines`, `broken` and the rules'
    /// state are unknown, and a client's append reads the whole file first.
    pub partial: bool,
    /// Every artifact the lines that keep the rules cite, with the line citing it (for
    /// verification to hash them again).
    pub artifacts: Vec<(u64, rules::Artifact)>,
}

/// What the next line is chained to.
#[derive(Debug, Clone)]
pub struct Tail {
    /// The last line's seq (0 for an empty ledger; on a broken ledger, the line count).
    pub seq: u64,
    /// The last line's hash ([`rules::GENESIS_PREV`] for an empty ledger).
    pub hash: String,
    pub ts: Option<String>,
    /// The consistency rules' state over every line that kept them.
    pub rules: Rules,
}

impl Default for Tail {
    fn default() -> Tail {
        Tail {
            seq: 0,
            hash: rules::GENESIS_PREV.to_string(),
            ts: None,
            rules: Rules::default(),
        }
    }
}

/// Verify one line against the tail so far, taking it in when it keeps every rule. Returns the
/// artifacts it cites.
fn verify_line(tail: &mut Tail, line: &str) -> Result<Vec<rules::Artifact>, Violation> {
    if line.len() > MAX_LINE {
        return Err(Violation {
            rule: "size",
            message: format!(
                "the line is {} bytes; the most a line may be is {MAX_LINE}",
                line.len()
            ),
        });
    }
    let ev: Map<String, Value> = match serde_json::from_str(line) {
        Ok(Value::Object(o)) => o,
        Ok(_) => {
            return Err(Violation {
                rule: "json",
                message: "the line is JSON but not an object".into(),
            })
        }
        Err(e) => {
            return Err(Violation {
                rule: "json",
                message: format!("the line is not JSON: {e}"),
            })
        }
    };
    rules::check_written(&ev, tail.seq + 1, &tail.hash, tail.ts.as_deref())?;
    rules::check_envelope(&ev)?;
    tail.rules.admit(&ev)?;
    tail.rules.take(&ev);
    // One more, or past a gap its correction declared.
    tail.seq = ev
        .get("seq")
        .and_then(Value::as_u64)
        .unwrap_or(tail.seq + 1);
    tail.ts = ev.get("ts").and_then(Value::as_str).map(str::to_string);
    rules::artifacts(&ev)
}

/// Read and verify a ledger's text. After the first violation the lines are still followed (so
/// that the tail is the real last line, for whatever is appended next), but no rule is
/// checked any more.
pub fn verify_text(text: &str) -> Read {
    let mut artifacts = Vec::new();
    let mut tail = Tail::default();
    let mut broken = None;
    let mut lines = 0u64;
    let mut last_line = None;
    let mut rest = text;
    while !rest.is_empty() {
        lines += 1;
        let (line, next, torn) = match rest.find('\n') {
            Some(i) => (&rest[..i], &rest[i + 1..], false),
            None => (rest, "", true),
        };
        rest = next;
        if broken.is_none() {
            let r = if torn {
                Err(Violation {
                    rule: "json",
                    message: "the last line has no newline (a torn write)".into(),
                })
            } else {
                verify_line(&mut tail, line).map(|cited| {
                    artifacts.extend(cited.into_iter().map(|a| (lines, a)));
                })
            };
            if let Err(violation) = r {
                broken = Some(Broken {
                    line: lines,
                    violation,
                });
            }
        }
        if broken.is_some() {
            // Followed, not checked: the chain goes on from the line as it is.
            tail.seq = tail.seq.max(lines);
            tail.ts = serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|v| v.get("ts").and_then(Value::as_str).map(str::to_string))
                .or(tail.ts.take());
        }
        tail.hash = rules::line_hash(line);
        if rest.is_empty() {
            last_line = Some(line.to_string());
        }
    }
    Read {
        lines,
        broken,
        tail,
        last_line,
        torn: !text.is_empty() && !text.ends_with('\n'),
        partial: false,
        artifacts,
    }
}

/// The tail from the file's last line alone: `None` when that cannot be told that way (a
/// torn or unreadable last line, one longer than a line may be), and the whole file must be
/// read. An absent or empty file is an empty ledger.
fn last_line_only(root: &Root, path: &Path) -> std::io::Result<Option<Read>> {
    use std::io::{Seek, SeekFrom};
    let mut f = match root.open_file(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(verify_text(""))),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(Some(verify_text("")));
    }
    let want = len.min(MAX_LINE as u64 + 2);
    f.seek(SeekFrom::Start(len - want))?;
    let mut buf = Vec::with_capacity(want as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut f, want), &mut buf)?;
    let Some(body) = buf.strip_suffix(b"\n") else {
        return Ok(None);
    };
    let line = match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => body.get(i + 1..).unwrap_or_default(),
        None if want == len => body,
        None => return Ok(None),
    };
    let Ok(line) = std::str::from_utf8(line) else {
        return Ok(None);
    };
    let Ok(Value::Object(ev)) = serde_json::from_str::<Value>(line) else {
        return Ok(None);
    };
    let Some(seq) = ev.get("seq").and_then(Value::as_u64) else {
        return Ok(None);
    };
    Ok(Some(Read {
        lines: seq,
        broken: None,
        tail: Tail {
            seq,
            hash: rules::line_hash(line),
            ts: ev.get("ts").and_then(Value::as_str).map(str::to_string),
            rules: Rules::default(),
        },
        last_line: Some(line.to_string()),
        torn: false,
        partial: true,
        artifacts: Vec::new(),
    }))
}

/// The file's identity, size and times, to notice a write by anyone else. The change time is
/// part of it: an edit of the same length whose modification time is put back still moves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

const NO_STAMP: Stamp = Stamp {
    ino: 0,
    len: 0,
    mtime_ns: 0,
    ctime_ns: 0,
};

fn stamp(root: &Root, path: &Path) -> Option<Stamp> {
    let m = root.stat(path).ok()??;
    Some(Stamp {
        ino: m.ino,
        len: m.len,
        mtime_ns: m.mtime_ns,
        ctime_ns: m.ctime_ns,
    })
}

/// The artifacts a verified ledger cites, hashed again (seed 003, rules 4 and 6): the first
/// that is missing, not a regular file, or whose bytes no longer hash to the sha256 its line
/// cites. `results` is the store's host-local area the paths are under, inside the repository
/// `root` (no link below it is followed); `memo` keeps each file's hash while its stamp stays
/// the same.
pub fn artifact_fault(
    root: &Root,
    results: &Path,
    cited: &[(u64, rules::Artifact)],
    memo: &mut std::collections::HashMap<String, ArtifactStamp>,
) -> Option<Broken> {
    let mut seen = std::collections::HashSet::new();
    for (line, a) in cited {
        let Some(want) = &a.sha256 else {
            continue;
        };
        seen.insert(a.path.as_str());
        let path = results.join(&a.path);
        let fault = |message: String| Broken {
            line: *line,
            violation: Violation {
                rule: "artifact",
                message,
            },
        };
        let m = match root.stat(&path) {
            Ok(Some(m)) if m.kind == Kind::File => m,
            Ok(Some(m)) => {
                return Some(fault(format!(
                    "artifact {} is {}, not a regular file",
                    a.path,
                    m.kind.describe()
                )))
            }
            Ok(None) => {
                return Some(fault(format!(
                    "artifact {} cannot be read: it does not exist",
                    a.path
                )))
            }
            Err(e) => return Some(fault(format!("artifact {} cannot be read: {e}", a.path))),
        };
        let stamp = (m.ino, m.len, m.mtime_ns, m.ctime_ns);
        let hashed = match memo.get(&a.path) {
            Some((s, h)) if *s == stamp => h.clone(),
            _ => match root.read(&path) {
                Ok((_, bytes)) => {
                    let h = proto::evidence::sha256_hex(&bytes);
                    memo.insert(a.path.clone(), (stamp, h.clone()));
                    h
                }
                Err(e) => return Some(fault(format!("artifact {} cannot be read: {e}", a.path))),
            },
        };
        if &hashed != want {
            return Some(fault(format!(
                "artifact {} no longer hashes to the sha256 this line cites (it hashes to {} now)",
                a.path,
                &hashed[..12]
            )));
        }
    }
    memo.retain(|p, _| seen.contains(p.as_str()));
    None
}

/// What an artifact's file looked like when it was hashed (inode, length, modification and
/// change times), and its hash then.
pub type ArtifactStamp = ((u64, u64, i128, i128), String);

/// One store's ledger, as its writer holds it.
#[derive(Debug)]
pub struct Ledger {
    /// The repository the store is in: every open walks from it (see [`Root`]).
    root: Root,
    path: PathBuf,
    /// What the file held when this writer last read or wrote it, and its stamp then.
    known: Option<(Stamp, Read)>,
}

impl Ledger {
    /// The ledger under `results`, inside the repository `root` (nothing is read yet).
    pub fn new(root: &Path, results: &Path) -> Ledger {
        Ledger {
            root: Root::new(root),
            path: results.join(DIR).join(FILE),
            known: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes as they are now, unverified (empty when there is none), read the way
    /// every read of the ledger is: no link below the repository's root, no FIFO waited on.
    pub fn read_bytes(&self) -> std::io::Result<Vec<u8>> {
        match self.root.read(&self.path) {
            Ok((_, b)) => Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Where the file's last line starts and its hash: a mark that later says, through
    /// [`Ledger::holds_mark`], that nothing up to that line changed (each line's hash chains the
    /// one before). Read from the end, at most 1 MiB; `None` when there is no whole last line.
    pub fn tail_mark(&self) -> Option<(u64, String)> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = self.root.open_file(&self.path).ok()?;
        let len = f.metadata().ok()?.len();
        let from = len.saturating_sub(1 << 20);
        f.seek(SeekFrom::Start(from)).ok()?;
        let mut tail = Vec::new();
        f.take(len - from).read_to_end(&mut tail).ok()?;
        let body = tail.strip_suffix(b"\n")?;
        let start = body.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if start == 0 && from > 0 {
            return None;
        }
        let line = std::str::from_utf8(body.get(start..)?).ok()?;
        Some((from + start as u64, rules::line_hash(line)))
    }

    /// Whether the file still holds, at `offset`, the line whose hash is `hash` (see
    /// [`Ledger::tail_mark`]).
    pub fn holds_mark(&self, offset: u64, hash: &str) -> bool {
        use std::io::{BufRead, Seek, SeekFrom};
        let Ok(mut f) = self.root.open_file(&self.path) else {
            return false;
        };
        if f.seek(SeekFrom::Start(offset)).is_err() {
            return false;
        }
        let mut line = Vec::new();
        let mut r = std::io::BufReader::new(std::io::Read::take(f, 1 << 20));
        if r.read_until(b'\n', &mut line).is_err() || line.pop() != Some(b'\n') {
            return false;
        }
        std::str::from_utf8(&line).is_ok_and(|l| rules::line_hash(l) == hash)
    }

    /// The last line as this writer last read or wrote it.
    pub fn last_line(&self) -> Option<String> {
        self.known.as_ref().and_then(|(_, r)| r.last_line.clone())
    }

    /// The file as it is now, verified: from memory while nobody else wrote it since.
    pub fn read(&mut self) -> std::io::Result<&Read> {
        let now = stamp(&self.root, &self.path);
        let fresh = match (&self.known, now) {
            (Some((_, r)), _) if r.partial => true,
            (Some((s, _)), Some(n)) => *s != n,
            (Some(_), None) | (None, _) => true,
        };
        if fresh {
            let text = match self.root.read(&self.path) {
                Ok((_, b)) => String::from_utf8(b).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{} is not UTF-8", self.path.display()),
                    )
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(e),
            };
            let read = verify_text(&text);
            let s = stamp(&self.root, &self.path).unwrap_or(NO_STAMP);
            self.known = Some((s, read));
        }
        match &self.known {
            Some((_, r)) => Ok(r),
            None => Err(std::io::Error::other("the ledger could not be read")),
        }
    }

    /// Append `events` (each already admitted by the caller against [`Ledger::read`]'s rules,
    /// with its envelope complete but for `seq`, `ts` and `prev`), chained after the tail and
    /// stamped with `ts`. Written in one `write`, then synced; on any failure the file is cut
    /// back to where it was, and nothing was appended. Returns the lines written.
    pub fn append(
        &mut self,
        events: Vec<Map<String, Value>>,
        ts: &str,
    ) -> std::io::Result<Vec<String>> {
        self.append_noting(events, ts, |_, _| Ok(()))
    }

    /// [`Ledger::append`], calling `before` with the first new line's seq and hash once the
    /// lines are made and before a byte is written: the exactly-once log records its intent
    /// there, so a retry after a crash can tell whether the batch landed. A failing `before`
    /// writes nothing.
    pub fn append_noting(
        &mut self,
        events: Vec<Map<String, Value>>,
        ts: &str,
        before: impl FnOnce(u64, &str) -> std::io::Result<()>,
    ) -> std::io::Result<Vec<String>> {
        self.read()?;
        self.write_batch(events, ts, before)
    }

    fn head_path(&self) -> PathBuf {
        self.path.with_file_name(HEAD)
    }

    /// The head kept beside the file: `Ok(None)` when there is none yet (a ledger older than
    /// heads, or none at all); an unreadable or garbled head file is an error.
    pub fn head(&self) -> std::io::Result<Option<Head>> {
        match self.root.read(&self.head_path()) {
            Ok((_, b)) => Head::parse(&String::from_utf8_lossy(&b))
                .map(Some)
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{} is not a ledger head", self.head_path().display()),
                    )
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Make `head` the head, durably: one write of one block in place, then synced.
    pub fn write_head(&self, head: &Head) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let f = self.root.dir(&dir)?.open_rw(std::ffi::OsStr::new(HEAD))?;
        f.write_all_at(&head.bytes(), 0)?;
        f.set_len(HEAD_BYTES as u64)?;
        f.sync_data()
    }

    /// [`Ledger::head_fault`] of the file as it is now.
    pub fn head_fault_now(&mut self) -> std::io::Result<Option<Broken>> {
        let read = self.read()?;
        let (lines, tail) = (read.lines, read.tail.seq);
        Ok(self.head_fault(lines, tail))
    }

    /// What is wrong with the file (`lines` long, its last seq `tail`) against the head, if
    /// anything: it ends before the head (lines were removed from its end), or the line at the
    /// head's seq is not the one evd wrote there (edited). A file that runs past its head by
    /// lines that keep the chain is a crash between an append and its head (the next append
    /// moves the head up).
    pub fn head_fault(&self, lines: u64, tail: u64) -> Option<Broken> {
        let head = match self.head() {
            Ok(Some(h)) => h,
            Ok(None) => return None,
            Err(e) => {
                return Some(Broken {
                    line: lines,
                    violation: Violation {
                        rule: "head",
                        message: e.to_string(),
                    },
                })
            }
        };
        if tail < head.seq {
            return Some(Broken {
                line: lines,
                violation: Violation {
                    rule: "head",
                    message: format!(
                        "the ledger ends at seq {} but its head says evd wrote up to seq {}: \
                         lines were removed from its end",
                        tail, head.seq
                    ),
                },
            });
        }
        if head.seq > 0 && self.line_hash(head.seq).as_deref() != Some(head.hash.as_str()) {
            return Some(Broken {
                line: head.seq,
                violation: Violation {
                    rule: "head",
                    message: format!(
                        "the line at seq {} is not the line evd wrote there (its hash differs \
                         from the head's): it was edited or replaced",
                        head.seq
                    ),
                },
            });
        }
        None
    }

    /// The hash of the line whose `seq` is `seq` as the file holds it now, if it has one (looked
    /// for from the end, where the lines asked about are; seqs can skip after a repair).
    pub fn line_hash(&self, seq: u64) -> Option<String> {
        let bytes = self.read_bytes().ok()?;
        let text = String::from_utf8_lossy(&bytes);
        text.split_terminator('\n').rev().find_map(|line| {
            let v: Value = serde_json::from_str(line).ok()?;
            match v.get("seq").and_then(Value::as_u64)? {
                s if s == seq => Some(Some(rules::line_hash(line))),
                s if s < seq => Some(None), // passed it: not there
                _ => None,
            }
        })?
    }

    /// Make the ledger appendable again, saying so in it (`evctl ledger repair`): a torn last
    /// line is moved aside to `results/<aside>` (never appended after, never deleted), and when
    /// lines were removed from the end (the file ends before its head) the seqs they held are
    /// declared skipped by the correction event itself, so that none is used twice. Each
    /// repair is journaled as a `ledger_correction` built by `event` from the payload; returns
    /// the payloads written (none when there was nothing to repair).
    pub fn repair(
        &mut self,
        results: &Path,
        aside: &str,
        ts: &str,
        event: impl Fn(Map<String, Value>) -> Map<String, Value>,
    ) -> std::io::Result<Vec<Map<String, Value>>> {
        let mut done = Vec::new();
        let bytes = self.read_bytes()?;
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            let cut = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            let fragment = bytes.get(cut..).unwrap_or_default();
            let kept = results.join(aside);
            let dir = kept.parent().map(Path::to_path_buf).unwrap_or_default();
            let name = kept.file_name().unwrap_or_default().to_os_string();
            self.root
                .ensure_dir(&dir)?
                .create_new(&name, fragment, None, true)?;
            let ledger_dir = self
                .path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let f = self
                .root
                .dir(&ledger_dir)?
                .open_rw(std::ffi::OsStr::new(FILE))?;
            f.set_len(cut as u64)?;
            f.sync_data()?;
            self.known = None;
            let mut p = Map::new();
            p.insert("kind".into(), "torn_tail_moved".into());
            p.insert("bytes".into(), fragment.len().into());
            p.insert(
                "artifacts".into(),
                serde_json::json!([{"kind": "torn-tail", "path": aside,
                    "sha256": proto::evidence::sha256_hex(fragment)}]),
            );
            done.push(p);
        }
        let tail = self.read()?.tail.seq;
        let gap = match self.head()? {
            Some(h) if h.seq > tail => {
                let mut p = Map::new();
                p.insert("kind".into(), "lines_removed".into());
                p.insert("from_seq".into(), (tail + 1).into());
                p.insert("to_seq".into(), h.seq.into());
                done.push(p);
                Some(h.seq)
            }
            _ => None,
        };
        if done.is_empty() {
            return Ok(done);
        }
        // The gap's correction first (it carries the jump), then the torn tail's.
        done.sort_by_key(|p| p.get("kind").and_then(Value::as_str) != Some("lines_removed"));
        let events = done.iter().cloned().map(&event).collect();
        self.write_batch_from(events, ts, gap, |_, _| Ok(()))?;
        Ok(done)
    }

    /// Append evd's own events, which no rule can refuse: chained after the last line, read
    /// alone when this writer does not know the file as it is (a process answering one
    /// command in-process does not read a long ledger whole to add a line to it). Written even
    /// to a ledger that breaks a rule: what evd did is recorded whatever came before.
    pub fn append_own(
        &mut self,
        events: Vec<Map<String, Value>>,
        ts: &str,
    ) -> std::io::Result<Vec<String>> {
        let current = matches!(
            (&self.known, stamp(&self.root, &self.path)),
            (Some((s, _)), Some(n)) if *s == n
        );
        if !current {
            match last_line_only(&self.root, &self.path)? {
                Some(read) => {
                    let s = stamp(&self.root, &self.path).unwrap_or(NO_STAMP);
                    self.known = Some((s, read));
                }
                None => {
                    self.read()?;
                }
            }
        }
        self.write_batch(events, ts, |_, _| Ok(()))
    }

    /// Write `events` chained after the tail this writer knows (`before`: see
    /// [`Ledger::append_noting`]).
    fn write_batch(
        &mut self,
        events: Vec<Map<String, Value>>,
        ts: &str,
        before: impl FnOnce(u64, &str) -> std::io::Result<()>,
    ) -> std::io::Result<Vec<String>> {
        self.write_batch_from(events, ts, None, before)
    }

    /// [`Ledger::write_batch`]; with `gap`, the first event is numbered after that seq (the
    /// seqs of removed lines, which its payload declares skipped).
    fn write_batch_from(
        &mut self,
        events: Vec<Map<String, Value>>,
        ts: &str,
        gap: Option<u64>,
        before: impl FnOnce(u64, &str) -> std::io::Result<()>,
    ) -> std::io::Result<Vec<String>> {
        let Some((_, read)) = self.known.as_mut() else {
            return Err(std::io::Error::other("the ledger could not be read"));
        };
        // Never after a torn fragment (it would become part of the next line), never over a
        // seq already used (a file whose end was removed): both wait for `evctl ledger repair`.
        if read.torn {
            return Err(std::io::Error::other(
                "the ledger's last line is torn (cut short by a crash or an edit); nothing is \
                 appended after it until `evctl ledger repair` moves it aside",
            ));
        }
        let head = self.head()?;
        let Some((_, read)) = self.known.as_mut() else {
            return Err(std::io::Error::other("the ledger could not be read"));
        };
        if let Some(h) = head
            .as_ref()
            .filter(|h| h.seq > read.tail.seq && gap != Some(h.seq))
        {
            return Err(std::io::Error::other(format!(
                "the ledger ends at seq {} but evd wrote up to seq {}: lines were removed from \
                 its end; nothing is appended (a seq is never used twice) until `evctl ledger \
                 repair`",
                read.tail.seq, h.seq
            )));
        }
        let mut tail = read.tail.clone();
        if let Some(g) = gap {
            tail.seq = tail.seq.max(g);
        }
        // Never before the last line's time (a clock stepping back keeps the order).
        let ts = match &tail.ts {
            Some(last) if crate::engine::clock::parse(last) > crate::engine::clock::parse(ts) => {
                last.clone()
            }
            _ => ts.to_string(),
        };
        let mut text = String::new();
        let mut lines = Vec::with_capacity(events.len());
        for mut ev in events {
            tail.seq += 1;
            ev.insert("seq".into(), tail.seq.into());
            ev.insert("ts".into(), ts.clone().into());
            ev.insert("prev".into(), tail.hash.clone().into());
            let line = proto::json::compact(&Value::Object(ev.clone()));
            if read.broken.is_none() && !read.partial {
                tail.rules.take(&ev);
                let cited = rules::artifacts(&ev).unwrap_or_default();
                read.artifacts
                    .extend(cited.into_iter().map(|a| (tail.seq, a)));
            }
            tail.hash = rules::line_hash(&line);
            tail.ts = Some(ts.clone());
            text.push_str(&line);
            text.push('\n');
            lines.push(line);
        }
        let first_seq = tail.seq + 1 - lines.len() as u64;
        if let Some(first) = lines.first() {
            if let Err(e) = before(first_seq, &rules::line_hash(first)) {
                // The rules' state above took the batch in: forget it, read afresh next time.
                self.known = None;
                return Err(e);
            }
        }
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut f = self
            .root
            .ensure_dir(&dir)?
            .open_append(std::ffi::OsStr::new(FILE))?;
        let before = f.metadata()?.len();
        let written = f.write_all(text.as_bytes()).and_then(|()| f.sync_data());
        if let Err(e) = written {
            // Nothing of a failed batch may stay: cut the file back to its old end.
            let _ = f.set_len(before);
            let _ = f.sync_data();
            self.known = None;
            return Err(e);
        }
        let new_head = Head {
            seq: tail.seq,
            hash: tail.hash.clone(),
        };
        read.lines += lines.len() as u64;
        read.tail = tail;
        read.torn = false;
        read.last_line = lines.last().cloned();
        let s = stamp(&self.root, &self.path);
        match s {
            Some(s) if s.len == before + text.len() as u64 => {
                if let Some((old, _)) = self.known.as_mut() {
                    *old = s;
                }
            }
            // Someone else wrote meanwhile: read it all again next time.
            _ => self.known = None,
        }
        // The batch is durable; its head follows. A crash in between leaves the file one batch
        // past its head, which verification takes as that crash (the lines keep the chain).
        if let Err(e) = self.write_head(&new_head) {
            tracing::warn!(error = %e, "cannot write the ledger's head");
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t: &str, payload: Value) -> Map<String, Value> {
        let v = serde_json::json!({
            "schema_version": rules::SCHEMA_VERSION, "event_type": t, "run_id": "R", "agent_id": "a",
            "host": {"hostname": "h", "platform": "linux", "repo_root": "/r"},
            "git": {"branch": "b", "head_sha": "", "dirty": false}, "payload": payload,
        });
        match v {
            Value::Object(o) => o,
            _ => Map::new(),
        }
    }

    #[test]
    fn appends_chain_and_a_torn_tail_waits_for_a_repair_that_moves_it_aside() {
        let d = tempfile::tempdir().expect("tmp");
        let mut l = Ledger::new(d.path(), d.path());
        let intent = event("intent_created", serde_json::json!({"intent_id": "I"}));
        let written = l
            .append(vec![intent.clone()], "2026-01-01T00:00:00Z")
            .expect("append");
        let again = l
            .append(vec![intent.clone()], "2025-01-01T00:00:00Z")
            .expect("append");
        // A clock that went back still writes in order.
        assert!(again[0].contains("\"ts\":\"2026-01-01T00:00:00Z\""));
        let read = verify_text(&std::fs::read_to_string(l.path()).expect("read"));
        assert_eq!(read.lines, 2);
        // The second intent_created breaks R1 (the writer trusts its caller to admit events).
        assert_eq!(
            read.broken.map(|b| (b.line, b.violation.rule)),
            Some((2, "R1"))
        );
        assert_eq!(read.tail.hash, rules::line_hash(&again[0]));
        assert!(written[0].contains(&format!("\"prev\":\"{}\"", rules::GENESIS_PREV)));
        assert_eq!(l.head().expect("head").map(|h| h.seq), Some(2));

        // Tear the last line: nothing is appended after it until it is repaired.
        let text = std::fs::read_to_string(l.path()).expect("read");
        let torn = text.trim_end_matches('\n');
        let torn = &torn[..torn.len() - 5];
        std::fs::write(l.path(), torn).expect("tear");
        let read = l.read().expect("read");
        assert!(read.torn);
        assert_eq!(
            read.broken.as_ref().map(|b| (b.line, b.violation.rule)),
            Some((2, "json"))
        );
        let own = || vec![event("daemon_started", serde_json::json!({}))];
        let e = l
            .append(own(), "2026-02-01T00:00:00Z")
            .expect_err("refused");
        assert!(e.to_string().contains("ledger repair"), "{e}");
        let fragment = torn.rsplit('\n').next().expect("a line").to_string();
        let done = l
            .repair(d.path(), "runs/R-1/torn", "2026-02-01T00:00:00Z", |p| {
                let mut e = event("ledger_correction", Value::Object(p));
                e.insert("run_id".into(), "R-1".into());
                e
            })
            .expect("repair");
        let kinds: Vec<_> = done.iter().map(|p| p["kind"].clone()).collect();
        // The torn second line is gone from the file, so its seq is declared skipped too.
        assert_eq!(
            kinds,
            [Value::from("lines_removed"), Value::from("torn_tail_moved")]
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("runs/R-1/torn")).expect("kept"),
            fragment
        );
        let text = std::fs::read_to_string(l.path()).expect("read");
        let after = verify_text(&text);
        assert!(!after.torn);
        assert_eq!(after.tail.seq, 4, "seq 2 skipped, never used twice: {text}");
        assert!(!text.contains(&fragment));
        assert!(l.head_fault_now().expect("head").is_none());
        l.append(own(), "2026-02-01T00:00:01Z")
            .expect("appendable again");
    }

    #[test]
    fn versions_other_than_the_readable_ones_are_refused_and_1_0_is_upgraded() {
        let mut e = event("intent_created", serde_json::json!({"intent_id": "I"}));
        e.insert("schema_version".into(), "1.0".into());
        assert!(rules::upgrade(&mut e).is_ok());
        assert_eq!(
            e.get("schema_version"),
            Some(&Value::from(rules::SCHEMA_VERSION))
        );
        e.insert("schema_version".into(), "2.0".into());
        assert_eq!(
            rules::upgrade(&mut e).map_err(|v| v.rule),
            Err("schema_version")
        );
        assert_eq!(
            rules::check_envelope(&e).map_err(|v| v.rule),
            Err("schema_version")
        );
    }
}
