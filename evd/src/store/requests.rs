//! Exactly-once writes: the requests a store applied, by the id the client gave them.
//!
//! Every write request carries a client-generated id. A client whose answer was lost (a
//! connection cut, a daemon killed, a timeout) asks again with the same id, and must get the
//! first answer, not a second write. So, in the store's host-local area
//! (`results/requests.jsonl`, one JSON object a line):
//!
//! 1. before a write appends its tick(s), an *intent* names the request and the tick that will
//!    be HEAD if it lands (`{"id":…,"tick":…}`), made durable first;
//! 2. once the write is done, its *answer* is recorded (`{"id":…,"answer":…}`), durable before the
//!    answer goes out.
//!
//! A retry then finds the answer and returns it; or finds an intent whose tick is in `ticks/`
//! (the daemon died between the append and the answer): applied, answer lost, not applied again;
//! or an intent whose tick never landed (died before the tick was durable, or the append failed
//! and removed it): applied again, which is safe. A request id is kept for the last
//! [`KEEP`] requests.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::sys::fsio;

/// The file, under `results/`.
pub const FILE: &str = "requests.jsonl";

/// How many request ids are remembered.
pub const KEEP: usize = 4096;

/// The largest answer kept; a larger one is remembered as applied, without its words.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// The longest request id accepted from a client (the id kept adds a digest of the request).
pub const MAX_ID_BYTES: usize = 128;

/// What is known about one request id.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// Its tick was about to be appended.
    Intent { tick: String },
    /// Its ledger batch was about to be appended, its first line at `seq` with `hash`.
    LedgerIntent { seq: u64, hash: String },
    /// Its tick landed but its daemon died before the answer; the next daemon took note.
    Recovered { tick: String },
    /// Done, with the answer (`None` when it was too large to keep).
    Done { answer: Option<Value> },
}

#[derive(Debug)]
pub struct RequestLog {
    path: PathBuf,
    loaded: bool,
    seen: HashMap<String, Seen>,
    /// Ids, oldest first (an id appears once, at its first record).
    order: VecDeque<String>,
    /// Lines in the file (compacted when it holds twice what is kept).
    lines: usize,
}

impl RequestLog {
    pub fn new(results: &Path) -> RequestLog {
        RequestLog {
            path: results.join(FILE),
            loaded: false,
            seen: HashMap::new(),
            order: VecDeque::new(),
            lines: 0,
        }
    }

    /// Forget what was read (the store was released or re-opened): the next use reads again.
    pub fn reset(&mut self) {
        self.loaded = false;
        self.seen.clear();
        self.order.clear();
        self.lines = 0;
    }

    fn load(&mut self) {
        if self.loaded {
            return;
        }
        self.loaded = true;
        let Ok(text) = fsio::read_text(&self.path) else {
            return;
        };
        for line in text.lines() {
            self.lines += 1;
            // A torn last line (a crash mid-append) or a foreign line is skipped.
            let Ok(Value::Object(o)) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(id) = o.get("id").and_then(Value::as_str) else {
                continue;
            };
            let entry = if let Some(tick) = o.get("recovered").and_then(Value::as_str) {
                Seen::Recovered {
                    tick: tick.to_string(),
                }
            } else if let Some(tick) = o.get("tick").and_then(Value::as_str) {
                Seen::Intent {
                    tick: tick.to_string(),
                }
            } else if let (Some(seq), Some(hash)) = (
                o.get("ledger_seq").and_then(Value::as_u64),
                o.get("ledger_hash").and_then(Value::as_str),
            ) {
                Seen::LedgerIntent {
                    seq,
                    hash: hash.to_string(),
                }
            } else if o.contains_key("answer") || o.contains_key("applied") {
                Seen::Done {
                    answer: o.get("answer").cloned(),
                }
            } else {
                continue;
            };
            self.remember(id.to_string(), entry);
        }
    }

    fn remember(&mut self, id: String, entry: Seen) {
        if self.seen.insert(id.clone(), entry).is_none() {
            self.order.push_back(id);
            while self.order.len() > KEEP {
                if let Some(old) = self.order.pop_front() {
                    self.seen.remove(&old);
                }
            }
        }
    }

    /// What is known about `id`.
    pub fn lookup(&mut self, id: &str) -> Option<Seen> {
        self.load();
        self.seen.get(id).cloned()
    }

    /// The ticks of writes that recorded their intent but never their answer: the daemon died
    /// between the two (or the write failed and took its tick back out).
    pub fn unfinished_ticks(&mut self) -> Vec<(String, String)> {
        self.load();
        self.order
            .iter()
            .filter_map(|id| match self.seen.get(id) {
                Some(Seen::Intent { tick }) => Some((id.clone(), tick.clone())),
                _ => None,
            })
            .collect()
    }

    /// Record, durably, that `id` is about to append `tick`.
    pub fn intent(&mut self, id: &str, tick: &str) -> io::Result<()> {
        self.load();
        let line =
            serde_json::json!({"id": id, "tick": tick, "at": crate::engine::clock::now_rfc3339()});
        self.append(&line)?;
        self.remember(
            id.to_string(),
            Seen::Intent {
                tick: tick.to_string(),
            },
        );
        Ok(())
    }

    /// Record, durably, that `id` is about to append a ledger batch whose first line is `seq`
    /// with `hash`.
    pub fn intent_ledger(&mut self, id: &str, seq: u64, hash: &str) -> io::Result<()> {
        self.load();
        let line = serde_json::json!({"id": id, "ledger_seq": seq, "ledger_hash": hash,
            "at": crate::engine::clock::now_rfc3339()});
        self.append(&line)?;
        self.remember(
            id.to_string(),
            Seen::LedgerIntent {
                seq,
                hash: hash.to_string(),
            },
        );
        Ok(())
    }

    /// Record, durably, that `id` landed as `tick` though its answer was never given (its
    /// daemon died first): a retry is told it was applied, as which tick.
    pub fn recovered(&mut self, id: &str, tick: &str) -> io::Result<()> {
        self.load();
        let at = crate::engine::clock::now_rfc3339();
        self.append(&serde_json::json!({"id": id, "recovered": tick, "at": at}))?;
        let entry = Seen::Recovered {
            tick: tick.to_string(),
        };
        match self.seen.get_mut(id) {
            Some(known) => *known = entry,
            None => self.remember(id.to_string(), entry),
        }
        Ok(())
    }

    /// Record, durably, the answer to `id`.
    pub fn done(&mut self, id: &str, answer: Value) -> io::Result<()> {
        self.load();
        let fits = serde_json::to_string(&answer).map_or(0, |s| s.len()) <= MAX_ANSWER_BYTES;
        let line = if fits {
            serde_json::json!({"id": id, "answer": answer, "at": crate::engine::clock::now_rfc3339()})
        } else {
            serde_json::json!({"id": id, "applied": true, "at": crate::engine::clock::now_rfc3339()})
        };
        self.append(&line)?;
        let entry = Seen::Done {
            answer: fits.then_some(answer),
        };
        match self.seen.get_mut(id) {
            Some(known) => *known = entry,
            None => self.remember(id.to_string(), entry),
        }
        if self.lines > 2 * KEEP {
            self.compact();
        }
        Ok(())
    }

    fn append(&mut self, v: &Value) -> io::Result<()> {
        let mut line = serde_json::to_string(v).map_err(io::Error::other)?;
        line.push('\n');
        let mut f = fsio::open_append(&self.path)?;
        f.write_all(line.as_bytes())?;
        f.sync_data()?;
        self.lines += 1;
        Ok(())
    }

    /// Rewrite the file with what is kept (atomically; a failure leaves the old file).
    fn compact(&mut self) {
        let mut out = String::new();
        for id in &self.order {
            let v = match self.seen.get(id) {
                Some(Seen::Intent { tick }) => serde_json::json!({"id": id, "tick": tick}),
                Some(Seen::LedgerIntent { seq, hash }) => {
                    serde_json::json!({"id": id, "ledger_seq": seq, "ledger_hash": hash})
                }
                Some(Seen::Recovered { tick }) => serde_json::json!({"id": id, "recovered": tick}),
                Some(Seen::Done { answer: Some(a) }) => serde_json::json!({"id": id, "answer": a}),
                Some(Seen::Done { answer: None }) => serde_json::json!({"id": id, "applied": true}),
                None => continue,
            };
            if let Ok(s) = serde_json::to_string(&v) {
                out.push_str(&s);
                out.push('\n');
            }
        }
        let Some(dir) = self.path.parent() else {
            return;
        };
        match fsio::replace_atomically(dir, &self.path, out.as_bytes()) {
            Ok(()) => self.lines = self.order.len(),
            Err(e) => tracing::warn!(error = %e, "cannot compact the request log"),
        }
    }
}

/// Whether `id` is acceptable as a request id (printable ASCII, bounded).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_and_answers_survive_a_reread_and_a_torn_line() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut log = RequestLog::new(d.path());
        assert_eq!(log.lookup("a"), None);
        log.intent("a", "aaaaaaaaaaaa").expect("intent");
        log.intent("b", "bbbbbbbbbbbb").expect("intent");
        log.done("a", serde_json::json!({"id": "aaaaaaaaaaaa"}))
            .expect("done");
        fsio::append(&d.path().join(FILE), b"{\"id\":\"c\",\"ti").expect("torn");
        let mut again = RequestLog::new(d.path());
        assert_eq!(
            again.lookup("a"),
            Some(Seen::Done {
                answer: Some(serde_json::json!({"id": "aaaaaaaaaaaa"}))
            })
        );
        assert_eq!(
            again.lookup("b"),
            Some(Seen::Intent {
                tick: "bbbbbbbbbbbb".into()
            })
        );
        assert_eq!(again.lookup("c"), None);
    }

    #[test]
    fn only_the_latest_requests_are_kept_and_the_file_stays_bounded() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut log = RequestLog::new(d.path());
        for i in 0..(2 * KEEP + 10) {
            log.done(&format!("r{i}"), serde_json::json!(i))
                .expect("done");
        }
        assert_eq!(log.lookup("r0"), None);
        assert!(log.lookup(&format!("r{}", 2 * KEEP + 9)).is_some());
        let lines = fsio::read_text(&d.path().join(FILE))
            .expect("read")
            .lines()
            .count();
        assert!(lines <= 2 * KEEP + 1, "{lines}");
    }

    #[test]
    fn ids_are_short_and_plain() {
        assert!(valid_id("0f3a-9c_x"));
        assert!(!valid_id(""));
        assert!(!valid_id("a b"));
        assert!(!valid_id(&"a".repeat(MAX_ID_BYTES + 1)));
    }
}
