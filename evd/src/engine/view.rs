//! The current view: the lineage collapse `list`, `brief`, `pending` and `check` share.
//!
//! 1. drop every tick some tick's `supersedes` names;
//! 2. order newest first (`held_since` descending as plain strings, ties by file name descending);
//! 3. keep the first tick per decision identity (the hashed payload without `parent_id`).

use std::collections::HashSet;

use proto::id::decision_identity;
use proto::Tick;

/// A decision identity, kept as a digest: the first 16 bytes of SHA-256 over the compact
/// [`decision_identity`] text (equal texts, equal digests; a collision is out of reach), so a
/// cache holding 100,000 ticks does not hold a second copy of every payload.
pub type Identity = [u8; 16];

/// The identity digest of a tick.
pub fn identity_of(t: &Tick) -> Identity {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(decision_identity(&t.decision, &t.observe, &t.grounds).as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// What the collapse reads of a tick.
pub trait ViewKeys {
    fn supersedes(&self) -> Option<&str>;
    fn held_since(&self) -> &str;
}

impl ViewKeys for Tick {
    fn supersedes(&self) -> Option<&str> {
        self.supersedes.as_deref()
    }
    fn held_since(&self) -> &str {
        &self.held_since
    }
}

/// `ticks` are `(file name, tick, identity)` of every parseable tick (the identity is
/// [`identity_of`] the tick, passed in so a cache can compute it once). Returns the current
/// ticks, newest first.
pub fn current<'a, T: ViewKeys>(ticks: &[(&'a str, &'a T, Identity)]) -> Vec<(&'a str, &'a T)> {
    let superseded: HashSet<&str> = ticks
        .iter()
        .filter_map(|(_, t, _)| t.supersedes())
        .collect();
    let mut ordered: Vec<(&str, &T, Identity)> = ticks
        .iter()
        .filter(|(file, _, _)| !superseded.contains(file))
        .copied()
        .collect();
    ordered.sort_by(|a, b| b.1.held_since().cmp(a.1.held_since()).then(b.0.cmp(a.0)));
    let mut seen = HashSet::new();
    ordered
        .into_iter()
        .filter(|(_, _, identity)| seen.insert(*identity))
        .map(|(f, t, _)| (f, t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inputs for [`current`], computing each identity on the spot.
    pub fn with_identities<'a>(
        ticks: &[(&'a str, &'a Tick)],
    ) -> Vec<(&'a str, &'a Tick, Identity)> {
        ticks
            .iter()
            .map(|(f, t)| (*f, *t, identity_of(t)))
            .collect()
    }
    use proto::Ground;

    fn tick(id: &str, decision: &str, held: &str, supersedes: Option<&str>) -> Tick {
        Tick {
            decision: decision.into(),
            observe: String::new(),
            grounds: vec![Ground {
                claim: "c".into(),
                supports: "chosen".into(),
                check: None,
            }],
            parent_id: String::new(),
            id: id.into(),
            status: "live".into(),
            held_since: held.into(),
            blame: "b".into(),
            authority: None,
            jurisdiction: None,
            source_ref: None,
            provenance: None,
            supersedes: supersedes.map(str::to_string),
            ratifies: None,
            unknown_keys: vec![],
        }
    }

    #[test]
    fn superseded_ticks_drop_and_identical_content_collapses_to_the_newest() {
        let a = tick("aaaaaaaaaaaa", "x", "2026-01-01T00:00:01Z", None);
        let b = tick("bbbbbbbbbbbb", "x", "2026-01-01T00:00:02Z", None);
        let c = tick(
            "cccccccccccc",
            "y",
            "2026-01-01T00:00:03Z",
            Some("bbbbbbbbbbbb"),
        );
        let all = [
            ("aaaaaaaaaaaa", &a),
            ("bbbbbbbbbbbb", &b),
            ("cccccccccccc", &c),
        ];
        let ids: Vec<&str> = current(&with_identities(&all))
            .iter()
            .map(|(f, _)| *f)
            .collect();
        // b is superseded, so a (same content, older) resurfaces.
        assert_eq!(ids, vec!["cccccccccccc", "aaaaaaaaaaaa"]);
    }
}
