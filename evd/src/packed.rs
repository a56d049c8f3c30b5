//! A tick as the daemon keeps it in memory: every string of it in one buffer, the structure as
//! spans into that buffer.
//!
//! A parsed [`Tick`] is some twenty allocations (each string, each ground, each liveness list)
//! and about a kilobyte of struct for 400 bytes of text; a store of 100,000 ticks held that way
//! costs 170 MB. A [`PackedTick`] is three allocations (its text, an index of where each string
//! ends, in 16-bit numbers unless the tick is over 64 KiB, and the handle) and about half the
//! bytes, and
//! answers what the hot paths ask (status, tags, the view's keys, a ground's binding) without
//! building anything. [`PackedTick::tick`] rebuilds the exact [`Tick`] for the verbs that need
//! one; it is lossless (`PackedTick::pack(&t).tick() == t`).

use proto::model::{Check, Ground, Liveness, SourceRef};
use proto::Tick;

/// The top-level strings, in the order they are laid out.
#[derive(Clone, Copy)]
enum F {
    Decision,
    Observe,
    ParentId,
    Id,
    Status,
    HeldSince,
    Blame,
    Authority,
    Jurisdiction,
    Provenance,
    Supersedes,
    Ratifies,
}
const FIELDS: usize = 12;
/// The first optional field: fields from here on may be absent (a bit in `index[0]`).
const FIRST_OPTIONAL: usize = F::Authority as usize;
/// Where the top-level strings' ends start in the index.
const ENDS_AT: usize = 2;

const KIND_NONE: u32 = 0;
const KIND_PERSON: u32 = 1;
const KIND_TEST: u32 = 2;
/// In a ground's header: the test binding has a counter-test.
const HAS_COUNTER: u32 = 4;

/// One tick, packed (see the module docs).
///
/// `text` holds every string, one after the other. `index` says where each ends and how the
/// grounds are shaped:
///
/// - `[0]`: which optional fields are present (bit `k` for field `FIRST_OPTIONAL + k`);
/// - `[1]`: the number of grounds;
/// - `[2..14]`: the end of each top-level string (an absent one is empty);
/// - then per ground: a header (its kind, [`HAS_COUNTER`]); for a test binding the lengths of
///   its platforms, triggered_by and surfaces lists; then the end of each of its strings:
///   claim, supports, and the person's ref, or the test's ref, verified_at_sha, counter_test
///   (empty when absent) and each list's items.
#[derive(Debug)]
pub struct PackedTick {
    text: Box<str>,
    index: Index,
    /// The decision identity ([`crate::view::identity_of`] the tick), for the view's collapse.
    identity: crate::view::Identity,
    /// What few ticks have (a `source_ref`, keys this version does not know), kept as it is.
    rare: Option<Box<Rare>>,
}

#[derive(Debug)]
struct Rare {
    source_ref: Option<SourceRef>,
    unknown_keys: Box<[Box<str>]>,
}

/// The index, in 16-bit numbers when every one fits (a tick under 64 KiB of text: nearly all).
#[derive(Debug)]
enum Index {
    Narrow(Box<[u16]>),
    Wide(Box<[u32]>),
}

impl Index {
    fn of(index: Vec<u32>) -> Index {
        if index.iter().all(|&n| n <= u32::from(u16::MAX)) {
            Index::Narrow(index.iter().map(|&n| n as u16).collect())
        } else {
            Index::Wide(index.into_boxed_slice())
        }
    }

    fn get(&self, i: usize) -> Option<u32> {
        match self {
            Index::Narrow(v) => v.get(i).map(|&n| u32::from(n)),
            Index::Wide(v) => v.get(i).copied(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Index::Narrow(v) => v.len(),
            Index::Wide(v) => v.len(),
        }
    }

    /// Entries `from..to` (clamped to the index).
    fn ends(&self, from: usize, to: usize) -> Ends<'_> {
        let to = to.min(self.len());
        let from = from.min(to);
        match self {
            Index::Narrow(v) => Ends::Narrow(v.get(from..to).unwrap_or_default()),
            Index::Wide(v) => Ends::Wide(v.get(from..to).unwrap_or_default()),
        }
    }
}

/// A run of index entries.
#[derive(Clone, Copy)]
enum Ends<'a> {
    Narrow(&'a [u16]),
    Wide(&'a [u32]),
}

impl<'a> Ends<'a> {
    fn iter(self) -> impl Iterator<Item = u32> + 'a {
        let (narrow, wide) = match self {
            Ends::Narrow(v) => (v, &[][..]),
            Ends::Wide(v) => (&[][..], v),
        };
        narrow
            .iter()
            .map(|&n| u32::from(n))
            .chain(wide.iter().copied())
    }

    fn last(self) -> Option<u32> {
        match self {
            Ends::Narrow(v) => v.last().map(|&n| u32::from(n)),
            Ends::Wide(v) => v.last().copied(),
        }
    }
}

/// Appends strings to the buffer being built, and their ends to the index.
struct Builder {
    text: String,
    index: Vec<u32>,
}

impl Builder {
    fn put(&mut self, s: &str) {
        self.text.push_str(s);
        self.index
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }
}

/// One ground of a packed tick, read in place.
pub struct GroundRef<'a> {
    pub claim: &'a str,
    pub supports: &'a str,
    pub check: CheckRef<'a>,
}

/// A ground's binding, read in place.
pub enum CheckRef<'a> {
    None,
    Person(&'a str),
    Test {
        reference: &'a str,
        verified_at_sha: &'a str,
        counter_test: Option<&'a str>,
        platforms: StrList<'a>,
        triggered_by: StrList<'a>,
        surfaces: StrList<'a>,
    },
}

/// A list of strings laid out one after the other: `ends` are their ends in `text`, the first
/// starting at `start`.
#[derive(Clone, Copy)]
pub struct StrList<'a> {
    text: &'a str,
    start: u32,
    ends: Ends<'a>,
}

impl<'a> StrList<'a> {
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + 'a {
        let text = self.text;
        let mut start = self.start;
        self.ends.iter().map(move |end| {
            let s = slice(text, start, end);
            start = end;
            s
        })
    }
}

fn slice(text: &str, start: u32, end: u32) -> &str {
    text.get(start as usize..end as usize).unwrap_or_default()
}

/// Walks the grounds' part of the index.
struct Grounds<'a> {
    tick: &'a PackedTick,
    at: usize,
    start: u32,
    left: u32,
}

impl<'a> Grounds<'a> {
    /// The next string: from where the last one ended to the next end in the index.
    fn next_str(&mut self) -> &'a str {
        let end = self.tick.index.get(self.at).unwrap_or(self.start);
        self.at += 1;
        let s = slice(&self.tick.text, self.start, end);
        self.start = end;
        s
    }

    fn list(&mut self, n: u32) -> StrList<'a> {
        let n = n as usize;
        let list = StrList {
            text: &self.tick.text,
            start: self.start,
            ends: self.tick.index.ends(self.at, self.at + n),
        };
        if let Some(end) = list.ends.last() {
            self.start = end;
        }
        self.at += n;
        list
    }
}

impl<'a> Iterator for Grounds<'a> {
    type Item = GroundRef<'a>;

    fn next(&mut self) -> Option<GroundRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let header = self.tick.index.get(self.at)?;
        self.at += 1;
        let counts = if header & 3 == KIND_TEST {
            let c = [0, 1, 2].map(|k| self.tick.index.get(self.at + k).unwrap_or(0));
            self.at += 3;
            c
        } else {
            [0; 3]
        };
        let claim = self.next_str();
        let supports = self.next_str();
        let check = match header & 3 {
            KIND_PERSON => CheckRef::Person(self.next_str()),
            KIND_TEST => {
                let reference = self.next_str();
                let verified_at_sha = self.next_str();
                let counter = self.next_str();
                CheckRef::Test {
                    reference,
                    verified_at_sha,
                    counter_test: (header & HAS_COUNTER != 0).then_some(counter),
                    platforms: self.list(counts[0]),
                    triggered_by: self.list(counts[1]),
                    surfaces: self.list(counts[2]),
                }
            }
            _ => CheckRef::None,
        };
        Some(GroundRef {
            claim,
            supports,
            check,
        })
    }
}

impl PackedTick {
    pub fn pack(t: &Tick) -> PackedTick {
        let mut b = Builder {
            text: String::with_capacity(text_len(t)),
            index: Vec::with_capacity(ENDS_AT + FIELDS + 8 * t.grounds.len()),
        };
        let optional = [
            &t.authority,
            &t.jurisdiction,
            &t.provenance,
            &t.supersedes,
            &t.ratifies,
        ];
        let present = optional
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_some())
            .fold(0u32, |m, (k, _)| m | 1 << k);
        b.index.push(present);
        b.index
            .push(u32::try_from(t.grounds.len()).unwrap_or(u32::MAX));
        for s in [
            &t.decision,
            &t.observe,
            &t.parent_id,
            &t.id,
            &t.status,
            &t.held_since,
            &t.blame,
        ] {
            b.put(s);
        }
        for o in optional {
            b.put(o.as_deref().unwrap_or_default());
        }
        for g in &t.grounds {
            match &g.check {
                None => {
                    b.index.push(KIND_NONE);
                    b.put(&g.claim);
                    b.put(&g.supports);
                }
                Some(Check::Person { reference }) => {
                    b.index.push(KIND_PERSON);
                    b.put(&g.claim);
                    b.put(&g.supports);
                    b.put(reference);
                }
                Some(Check::Test {
                    reference,
                    verified_at_sha,
                    counter_test,
                    liveness,
                }) => {
                    let counter = if counter_test.is_some() {
                        HAS_COUNTER
                    } else {
                        0
                    };
                    b.index.push(KIND_TEST | counter);
                    let lists = [
                        &liveness.platforms,
                        &liveness.triggered_by,
                        &liveness.surfaces,
                    ];
                    for l in lists {
                        b.index.push(u32::try_from(l.len()).unwrap_or(u32::MAX));
                    }
                    b.put(&g.claim);
                    b.put(&g.supports);
                    b.put(reference);
                    b.put(verified_at_sha);
                    b.put(counter_test.as_deref().unwrap_or_default());
                    for item in lists.into_iter().flatten() {
                        b.put(item);
                    }
                }
            }
        }
        PackedTick {
            text: b.text.into_boxed_str(),
            index: Index::of(b.index),
            identity: crate::view::identity_of(t),
            rare: (t.source_ref.is_some() || !t.unknown_keys.is_empty()).then(|| {
                Box::new(Rare {
                    source_ref: t.source_ref.clone(),
                    unknown_keys: t.unknown_keys.iter().map(|k| k.as_str().into()).collect(),
                })
            }),
        }
    }

    /// The tick, rebuilt.
    pub fn tick(&self) -> Tick {
        let s = |f: F| self.f(f).to_string();
        let o = |f: F| self.fo(f).map(str::to_string);
        let list = |l: StrList<'_>| l.iter().map(str::to_string).collect();
        Tick {
            decision: s(F::Decision),
            observe: s(F::Observe),
            grounds: self
                .grounds()
                .map(|g| Ground {
                    claim: g.claim.to_string(),
                    supports: g.supports.to_string(),
                    check: match g.check {
                        CheckRef::None => None,
                        CheckRef::Person(r) => Some(Check::Person {
                            reference: r.to_string(),
                        }),
                        CheckRef::Test {
                            reference,
                            verified_at_sha,
                            counter_test,
                            platforms,
                            triggered_by,
                            surfaces,
                        } => Some(Check::Test {
                            reference: reference.to_string(),
                            verified_at_sha: verified_at_sha.to_string(),
                            counter_test: counter_test.map(str::to_string),
                            liveness: Liveness {
                                platforms: list(platforms),
                                triggered_by: list(triggered_by),
                                surfaces: list(surfaces),
                            },
                        }),
                    },
                })
                .collect(),
            parent_id: s(F::ParentId),
            id: s(F::Id),
            status: s(F::Status),
            held_since: s(F::HeldSince),
            blame: s(F::Blame),
            authority: o(F::Authority),
            jurisdiction: o(F::Jurisdiction),
            source_ref: self.rare.as_ref().and_then(|r| r.source_ref.clone()),
            provenance: o(F::Provenance),
            supersedes: o(F::Supersedes),
            ratifies: o(F::Ratifies),
            unknown_keys: self
                .rare
                .iter()
                .flat_map(|r| r.unknown_keys.iter())
                .map(|k| k.to_string())
                .collect(),
        }
    }

    /// Every ground, read in place.
    pub fn grounds(&self) -> impl Iterator<Item = GroundRef<'_>> {
        Grounds {
            tick: self,
            at: ENDS_AT + FIELDS,
            start: self.index.get(ENDS_AT + FIELDS - 1).unwrap_or(0),
            left: self.index.get(1).unwrap_or(0),
        }
    }

    fn f(&self, f: F) -> &str {
        let k = f as usize;
        let start = match k {
            0 => 0,
            _ => self.index.get(ENDS_AT + k - 1).unwrap_or(0),
        };
        let end = self.index.get(ENDS_AT + k).unwrap_or(start);
        slice(&self.text, start, end)
    }

    fn fo(&self, f: F) -> Option<&str> {
        let bit = (f as usize).checked_sub(FIRST_OPTIONAL)?;
        let present = self.index.get(0).unwrap_or(0);
        (present & (1 << bit) != 0).then(|| self.f(f))
    }

    pub fn identity(&self) -> crate::view::Identity {
        self.identity
    }
    pub fn decision(&self) -> &str {
        self.f(F::Decision)
    }
    pub fn parent_id(&self) -> &str {
        self.f(F::ParentId)
    }
    pub fn id(&self) -> &str {
        self.f(F::Id)
    }
    pub fn status(&self) -> &str {
        self.f(F::Status)
    }
    pub fn held_since(&self) -> &str {
        self.f(F::HeldSince)
    }
    pub fn blame(&self) -> &str {
        self.f(F::Blame)
    }
    pub fn authority(&self) -> Option<&str> {
        self.fo(F::Authority)
    }
    pub fn jurisdiction(&self) -> Option<&str> {
        self.fo(F::Jurisdiction)
    }
    pub fn provenance(&self) -> Option<&str> {
        self.fo(F::Provenance)
    }
    pub fn supersedes(&self) -> Option<&str> {
        self.fo(F::Supersedes)
    }
    pub fn ratifies(&self) -> Option<&str> {
        self.fo(F::Ratifies)
    }
    pub fn source_ref_key(&self) -> Option<String> {
        self.rare
            .as_ref()
            .and_then(|r| r.source_ref.as_ref())
            .map(SourceRef::key)
    }
    pub fn is_agent_proposed(&self) -> bool {
        self.provenance() == Some(proto::vocab::AGENT_PROPOSED)
    }
    /// Whether some ground is a road not taken (`supports: rejected:<option>`).
    pub fn has_rejected_ground(&self) -> bool {
        self.grounds().any(|g| g.supports.starts_with("rejected:"))
    }
    pub fn has_test_check(&self) -> bool {
        self.grounds()
            .any(|g| matches!(g.check, CheckRef::Test { .. }))
    }

    /// Ground `index`'s claim and supports (empty for an index out of range).
    pub fn ground_text(&self, index: usize) -> (&str, &str) {
        self.grounds()
            .nth(index)
            .map_or(("", ""), |g| (g.claim, g.supports))
    }

    /// Each test binding: (ground index, selector, `triggered_by`).
    pub fn test_bindings(&self) -> impl Iterator<Item = (usize, &str, StrList<'_>)> {
        self.grounds()
            .enumerate()
            .filter_map(|(i, g)| match g.check {
                CheckRef::Test {
                    reference,
                    triggered_by,
                    ..
                } => Some((i, reference, triggered_by)),
                _ => None,
            })
    }
}

/// The buffer a tick packs into.
fn text_len(t: &Tick) -> usize {
    let o = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let grounds: usize = t
        .grounds
        .iter()
        .map(|g| {
            g.claim.len()
                + g.supports.len()
                + match &g.check {
                    None => 0,
                    Some(Check::Person { reference }) => reference.len(),
                    Some(Check::Test {
                        reference,
                        verified_at_sha,
                        counter_test,
                        liveness,
                    }) => {
                        reference.len()
                            + verified_at_sha.len()
                            + o(counter_test)
                            + [
                                &liveness.platforms,
                                &liveness.triggered_by,
                                &liveness.surfaces,
                            ]
                            .iter()
                            .flat_map(|v| v.iter())
                            .map(String::len)
                            .sum::<usize>()
                    }
                }
        })
        .sum();
    t.decision.len()
        + t.observe.len()
        + t.parent_id.len()
        + t.id.len()
        + t.status.len()
        + t.held_since.len()
        + t.blame.len()
        + o(&t.authority)
        + o(&t.jurisdiction)
        + o(&t.provenance)
        + o(&t.supersedes)
        + o(&t.ratifies)
        + grounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_is_lossless_and_the_accessors_read_the_fields() {
        let text = r#"{"authority":"user-ruled","blame":"Wang Yu","decision":"d ✓","grounds":[
            {"claim":"c0","supports":"chosen","check":{"by":"person","ref":"when"}},
            {"claim":"r","supports":"rejected:x"},
            {"claim":"c2","supports":"chosen","check":{"by":"test","ref":"cargo test a",
              "verified_at_sha":"0123456789abcdef0123456789abcdef01234567","counter_test":"cargo test b",
              "liveness":{"platforms":["linux","mac"],"triggered_by":["db/","src/a.rs"],"surfaces":["api"]}}},
            {"claim":"c3","supports":"chosen","check":{"by":"test","ref":"cargo test c",
              "verified_at_sha":"0123456789abcdef0123456789abcdef01234567",
              "liveness":{"platforms":["local"],"triggered_by":["**"],"surfaces":["cli","x"]}}}],
            "held_since":"2026-01-01T00:00:00Z","id":"bbbbbbbbbbbb","observe":"","parent_id":"aaaaaaaaaaaa",
            "provenance":"agent-proposed","source_ref":{"k":1},"status":"live","supersedes":"cccccccccccc","zz":1}"#;
        let t = Tick::parse(text).expect("a tick");
        let p = PackedTick::pack(&t);
        assert_eq!(p.tick(), t);
        assert_eq!(p.decision(), "d ✓");
        assert_eq!(p.authority(), Some("user-ruled"));
        assert_eq!(p.jurisdiction(), None);
        assert_eq!(p.supersedes(), Some("cccccccccccc"));
        assert_eq!(p.ratifies(), None);
        assert!(p.is_agent_proposed() && p.has_rejected_ground() && p.has_test_check());
        assert_eq!(p.source_ref_key(), t.source_ref_key());
        let b: Vec<(usize, &str, Vec<&str>)> = p
            .test_bindings()
            .map(|(i, r, tb)| (i, r, tb.iter().collect()))
            .collect();
        assert_eq!(
            b,
            vec![
                (2, "cargo test a", vec!["db/", "src/a.rs"]),
                (3, "cargo test c", vec!["**"])
            ]
        );
        assert_eq!(p.ground_text(3), ("c3", "chosen"));
        assert_eq!(p.ground_text(9), ("", ""));
        let bare = Tick::parse(
            r#"{"blame":"","decision":"","grounds":[],"held_since":"","id":"","observe":"","parent_id":"","status":""}"#,
        )
        .expect("a tick");
        assert_eq!(PackedTick::pack(&bare).tick(), bare);
    }

    #[test]
    fn a_tick_of_more_than_64_kib_of_text_packs_losslessly_too() {
        let mut t = Tick::parse(
            r#"{"blame":"b","decision":"d","grounds":[{"claim":"c","supports":"chosen","check":{"by":"test","ref":"t",
              "verified_at_sha":"0123456789abcdef0123456789abcdef01234567",
              "liveness":{"platforms":["p"],"triggered_by":["a/","b/"],"surfaces":["s"]}}}],
              "held_since":"h","id":"bbbbbbbbbbbb","observe":"","parent_id":"aaaaaaaaaaaa","status":"live"}"#,
        )
        .expect("a tick");
        t.observe = "ö".repeat(40_000);
        let p = PackedTick::pack(&t);
        assert!(matches!(p.index, Index::Wide(_)));
        assert_eq!(p.tick(), t);
        let b: Vec<Vec<&str>> = p
            .test_bindings()
            .map(|(_, _, tb)| tb.iter().collect())
            .collect();
        assert_eq!(b, vec![vec!["a/", "b/"]]);
        t.observe.clear();
        assert!(matches!(PackedTick::pack(&t).index, Index::Narrow(_)));
    }
}
