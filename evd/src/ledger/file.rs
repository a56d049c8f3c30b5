//! The ledger file of one store, `results/ledger/events.jsonl`: read and verified line by line,
//! appended to (one `write` per batch, then `fsync`) by its only writer, the evd that owns the
//! store.
//!
//! The writer keeps the tail (the last line's seq, hash and time, and the rules' state) between
//! appends. Before each append it compares the file's stamp with the one it left: a file
//! changed by anyone else is read and verified again from the start. A batch that cannot be
//! written whole is cut back off, so an append reported as failed leaves nothing behind.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::rules::{self, Rules, Violation};

/// Where a store's ledger lives, under its `results/`.
pub const DIR: &str = "ledger";
pub const FILE: &str = "events.jsonl";

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
    tail.seq += 1;
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
fn last_line_only(path: &Path) -> std::io::Result<Option<Read>> {
    use std::io::{Seek, SeekFrom};
    let mut f = match std::fs::File::open(path) {
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

/// The file's identity and size, to notice a write by anyone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(Stamp {
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

/// The artifacts a verified ledger cites, hashed again (seed 003, rules 4 and 6): the first
/// that is missing, not a regular file, or whose bytes no longer hash to the sha256 its line
/// cites. `results` is the store's host-local area the paths are under; `memo` keeps each
/// file's hash while its stamp stays the same.
pub fn artifact_fault(
    results: &Path,
    cited: &[(u64, rules::Artifact)],
    memo: &mut std::collections::HashMap<String, (u64, u64, i128, String)>,
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
        let m = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => m,
            Ok(_) => return Some(fault(format!("artifact {} is not a regular file", a.path))),
            Err(e) => return Some(fault(format!("artifact {} cannot be read: {e}", a.path))),
        };
        let stamp = (
            m.ino(),
            m.len(),
            i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        );
        let hashed = match memo.get(&a.path) {
            Some((ino, len, mtime, h)) if (*ino, *len, *mtime) == stamp => h.clone(),
            _ => match std::fs::read(&path) {
                Ok(bytes) => {
                    let h = proto::evidence::sha256_hex(&bytes);
                    memo.insert(a.path.clone(), (stamp.0, stamp.1, stamp.2, h.clone()));
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

/// One store's ledger, as its writer holds it.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    /// What the file held when this writer last read or wrote it, and its stamp then.
    known: Option<(Stamp, Read)>,
}

impl Ledger {
    /// The ledger under `results` (nothing is read yet).
    pub fn new(results: &Path) -> Ledger {
        Ledger {
            path: results.join(DIR).join(FILE),
            known: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last line as this writer last read or wrote it.
    pub fn last_line(&self) -> Option<String> {
        self.known.as_ref().and_then(|(_, r)| r.last_line.clone())
    }

    /// The file as it is now, verified: from memory while nobody else wrote it since.
    pub fn read(&mut self) -> std::io::Result<&Read> {
        let now = stamp(&self.path);
        let fresh = match (&self.known, now) {
            (Some((_, r)), _) if r.partial => true,
            (Some((s, _)), Some(n)) => *s != n,
            (Some(_), None) | (None, _) => true,
        };
        if fresh {
            let text = match std::fs::read(&self.path) {
                Ok(b) => String::from_utf8(b).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{} is not UTF-8", self.path.display()),
                    )
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(e),
            };
            let read = verify_text(&text);
            let s = stamp(&self.path).unwrap_or(Stamp {
                ino: 0,
                len: 0,
                mtime_ns: 0,
            });
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
        self.read()?;
        self.write_batch(events, ts)
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
        let current =
            matches!((&self.known, stamp(&self.path)), (Some((s, _)), Some(n)) if *s == n);
        if !current {
            match last_line_only(&self.path)? {
                Some(read) => {
                    let s = stamp(&self.path).unwrap_or(Stamp {
                        ino: 0,
                        len: 0,
                        mtime_ns: 0,
                    });
                    self.known = Some((s, read));
                }
                None => {
                    self.read()?;
                }
            }
        }
        self.write_batch(events, ts)
    }

    /// Write `events` chained after the tail this writer knows.
    fn write_batch(
        &mut self,
        events: Vec<Map<String, Value>>,
        ts: &str,
    ) -> std::io::Result<Vec<String>> {
        let Some((_, read)) = self.known.as_mut() else {
            return Err(std::io::Error::other("the ledger could not be read"));
        };
        let mut tail = read.tail.clone();
        // Never before the last line's time (a clock stepping back keeps the order).
        let ts = match &tail.ts {
            Some(last) if crate::engine::clock::parse(last) > crate::engine::clock::parse(ts) => {
                last.clone()
            }
            _ => ts.to_string(),
        };
        // A torn last line is ended first, so that it stays the line it was (and the chain
        // already runs through it), rather than running into the first new one.
        let mut text = if read.torn {
            "\n".to_string()
        } else {
            String::new()
        };
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
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        crate::sys::fsio::ensure_dir(&dir)?;
        let before = stamp(&self.path).map_or(0, |s| s.len);
        let mut f = crate::sys::fsio::open_append(&self.path)?;
        let written = f.write_all(text.as_bytes()).and_then(|()| f.sync_data());
        if let Err(e) = written {
            // Nothing of a failed batch may stay: cut the file back to its old end.
            let _ = f.set_len(before);
            let _ = f.sync_data();
            self.known = None;
            return Err(e);
        }
        read.lines += lines.len() as u64;
        read.tail = tail;
        read.torn = false;
        read.last_line = lines.last().cloned();
        let s = stamp(&self.path);
        match s {
            Some(s) if s.len == before + text.len() as u64 => {
                if let Some((old, _)) = self.known.as_mut() {
                    *old = s;
                }
            }
            // Someone else wrote meanwhile: read it all again next time.
            _ => self.known = None,
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
    fn appends_chain_and_a_torn_tail_is_ended_before_the_next_line() {
        let d = tempfile::tempdir().expect("tmp");
        let mut l = Ledger::new(d.path());
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

        // Tear the last line: the next append ends it first, and the chain runs through it.
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
        let last_torn = torn.rsplit('\n').next().expect("a line").to_string();
        let next = l
            .append(
                vec![event("daemon_started", serde_json::json!({}))],
                "2026-02-01T00:00:00Z",
            )
            .expect("append");
        let text = std::fs::read_to_string(l.path()).expect("read");
        assert!(text.ends_with(&format!("{last_torn}\n{}\n", next[0])));
        assert!(next[0].contains(&format!("\"prev\":\"{}\"", rules::line_hash(&last_torn))));
        assert!(next[0].contains("\"seq\":3"));
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
