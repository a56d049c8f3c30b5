//! Witnessing between hosts (pure): what a ledger copy says of itself (its last event) and of
//! other hosts' ledgers (the `ledger_witnessed` events its evd journaled when it accepted
//! them), and the line hashes those claims are checked against.
//!
//! A host that accepted another's ledger up to event seq N journals that event's hash. Once
//! it publishes, every host holds that claim: a copy of the witnessed host's ledger whose
//! event N differs, or that ends before N, was rewritten after it was seen, whoever first
//! fetches it.
//!
//! Owns the claim's shape and reading claims and hashes out of a ledger's text. It must not
//! read files or git (the caller hands the text) or decide what a mismatch means for a host.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::rules::line_hash;

/// The event evd journals when it accepts a copy of another host's ledger.
pub const WITNESSED: &str = "ledger_witnessed";

/// "Host `host`'s ledger, as accepted (at ledger commit `commit`), held event `seq` with the
/// line hash `hash`".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Claim {
    pub host: String,
    pub seq: u64,
    pub hash: String,
    #[serde(default)]
    pub commit: String,
}

/// What one ledger copy is: how many events, its last one, and what it witnessed of others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    pub events: u64,
    pub seq: u64,
    pub hash: String,
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// The payload of the `ledger_witnessed` event for a copy of `host`'s ledger fetched from
/// `remote` at `commit`.
pub fn payload(host: &str, remote: &str, commit: &str, facts: &Facts) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("host".into(), host.into());
    p.insert("remote".into(), remote.into());
    p.insert("commit".into(), commit.into());
    p.insert("seq".into(), facts.seq.into());
    p.insert("hash".into(), facts.hash.clone().into());
    p.insert("events".into(), facts.events.into());
    p
}

/// The facts of a ledger's text whose last line has seq `seq` and hash `hash` (from its
/// verification): every witness claim it carries (its lines naming [`WITNESSED`], parsed).
pub fn facts(text: &str, events: u64, seq: u64, hash: &str) -> Facts {
    let quoted = format!("\"{WITNESSED}\"");
    let mut claims: BTreeSet<Claim> = BTreeSet::new();
    for line in text.lines().filter(|l| l.contains(quoted.as_str())) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v.get("event_type").and_then(Value::as_str) != Some(WITNESSED) {
            continue;
        }
        let p = &v["payload"];
        let (Some(host), Some(seq), Some(hash)) = (
            p.get("host").and_then(Value::as_str),
            p.get("seq").and_then(Value::as_u64),
            p.get("hash").and_then(Value::as_str),
        ) else {
            continue;
        };
        claims.insert(Claim {
            host: host.to_string(),
            seq,
            hash: hash.to_string(),
            commit: p
                .get("commit")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        });
    }
    // Of each host, the latest claim says the most (an earlier one is a prefix of it when the
    // chain is whole); the others are kept too, so a truncation below any of them is seen.
    Facts {
        events,
        seq,
        hash: hash.to_string(),
        claims: claims.into_iter().collect(),
    }
}

#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

/// The hash of each line of `text` whose event seq is one of `seqs` (a seq not there is
/// missing from the answer).
pub fn hashes_at(text: &str, seqs: &BTreeSet<u64>) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let Some(&last) = seqs.iter().next_back() else {
        return out;
    };
    for line in text.lines() {
        let Ok(SeqOnly { seq }) = serde_json::from_str::<SeqOnly>(line) else {
            continue;
        };
        if seqs.contains(&seq) {
            out.insert(seq, line_hash(line));
        }
        if seq >= last {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_hashes_are_read_from_the_lines_that_carry_them() {
        let text = concat!(
            r#"{"event_type":"daemon_started","payload":{},"seq":1}"#,
            "\n",
            r#"{"event_type":"ledger_witnessed","payload":{"commit":"c1","host":"b","seq":7,"hash":"h7"},"seq":2}"#,
            "\n",
            r#"{"event_type":"tool_call","payload":{"note":"\"ledger_witnessed\""},"seq":3}"#,
            "\n",
        );
        let f = facts(text, 3, 3, "x");
        assert_eq!(
            f.claims,
            vec![Claim {
                host: "b".into(),
                seq: 7,
                hash: "h7".into(),
                commit: "c1".into()
            }]
        );
        let seqs: BTreeSet<u64> = [2, 3, 9].into_iter().collect();
        let h = hashes_at(text, &seqs);
        assert_eq!(h.len(), 2, "seq 9 is not there");
        assert_eq!(h[&2], line_hash(text.lines().nth(1).expect("line")));
        assert_eq!(h[&3], line_hash(text.lines().nth(2).expect("line")));
        let p = payload("b", "origin", "c9", &f);
        assert_eq!(p["seq"], 3);
        assert_eq!(p["host"], "b");
    }
}
