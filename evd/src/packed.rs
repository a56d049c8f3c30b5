//! A tick as the daemon keeps it in memory: every string of it in one buffer, the structure as
//! spans into that buffer.
//!
//! A parsed [`Tick`] is some twenty allocations (each string, each ground, each liveness list)
//! and about a kilobyte of struct for 400 bytes of text; a store of 100,000 ticks held that way
//! costs 170 MB. A [`PackedTick`] is four or five allocations and about half the bytes, and
//! answers what the hot paths ask (status, tags, the view's keys, a ground's binding) without
//! building anything. [`PackedTick::tick`] rebuilds the exact [`Tick`] for the verbs that need
//! one; it is lossless (`PackedTick::pack(&t).tick() == t`).

use proto::model::{Check, Ground, Liveness, SourceRef};
use proto::Tick;

/// Where one string lies in the buffer; `len == NONE` is an absent optional string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    at: u32,
    len: u32,
}

const NONE: u32 = u32::MAX;

const ABSENT: Span = Span { at: 0, len: NONE };

/// The top-level strings, in this order.
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

#[derive(Debug)]
struct PGround {
    claim: Span,
    supports: Span,
    check: PCheck,
}

#[derive(Debug)]
enum PCheck {
    None,
    Person(Span),
    Test(Box<PTest>),
}

#[derive(Debug)]
struct PTest {
    reference: Span,
    verified_at_sha: Span,
    counter_test: Span,
    platforms: Box<[Span]>,
    triggered_by: Box<[Span]>,
    surfaces: Box<[Span]>,
}

/// One tick, packed (see the module docs).
#[derive(Debug)]
pub struct PackedTick {
    text: Box<str>,
    fields: [Span; FIELDS],
    grounds: Box<[PGround]>,
    /// Rare (a few in a thousand ticks): kept as it is.
    source_ref: Option<Box<SourceRef>>,
    /// Almost always empty (no allocation).
    unknown_keys: Box<[Box<str>]>,
}

/// Appends strings to the buffer being built.
struct Builder {
    text: String,
}

impl Builder {
    fn put(&mut self, s: &str) -> Span {
        let at = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        let len = u32::try_from(s.len()).unwrap_or(u32::MAX - 1).min(NONE - 1);
        self.text.push_str(s);
        Span { at, len }
    }
    fn opt(&mut self, s: Option<&str>) -> Span {
        s.map_or(ABSENT, |s| self.put(s))
    }
    fn list(&mut self, v: &[String]) -> Box<[Span]> {
        v.iter().map(|s| self.put(s)).collect()
    }
}

impl PackedTick {
    pub fn pack(t: &Tick) -> PackedTick {
        let mut b = Builder {
            text: String::with_capacity(text_len(t)),
        };
        let fields = [
            b.put(&t.decision),
            b.put(&t.observe),
            b.put(&t.parent_id),
            b.put(&t.id),
            b.put(&t.status),
            b.put(&t.held_since),
            b.put(&t.blame),
            b.opt(t.authority.as_deref()),
            b.opt(t.jurisdiction.as_deref()),
            b.opt(t.provenance.as_deref()),
            b.opt(t.supersedes.as_deref()),
            b.opt(t.ratifies.as_deref()),
        ];
        let grounds = t
            .grounds
            .iter()
            .map(|g| PGround {
                claim: b.put(&g.claim),
                supports: b.put(&g.supports),
                check: match &g.check {
                    None => PCheck::None,
                    Some(Check::Person { reference }) => PCheck::Person(b.put(reference)),
                    Some(Check::Test {
                        reference,
                        verified_at_sha,
                        counter_test,
                        liveness,
                    }) => PCheck::Test(Box::new(PTest {
                        reference: b.put(reference),
                        verified_at_sha: b.put(verified_at_sha),
                        counter_test: b.opt(counter_test.as_deref()),
                        platforms: b.list(&liveness.platforms),
                        triggered_by: b.list(&liveness.triggered_by),
                        surfaces: b.list(&liveness.surfaces),
                    })),
                },
            })
            .collect();
        PackedTick {
            text: b.text.into_boxed_str(),
            fields,
            grounds,
            source_ref: t.source_ref.clone().map(Box::new),
            unknown_keys: t.unknown_keys.iter().map(|k| k.as_str().into()).collect(),
        }
    }

    /// The tick, rebuilt.
    pub fn tick(&self) -> Tick {
        let s = |f: F| self.s(self.fields[f as usize]).to_string();
        let o = |f: F| self.opt(self.fields[f as usize]).map(str::to_string);
        let list = |v: &[Span]| v.iter().map(|&x| self.s(x).to_string()).collect();
        Tick {
            decision: s(F::Decision),
            observe: s(F::Observe),
            grounds: self
                .grounds
                .iter()
                .map(|g| Ground {
                    claim: self.s(g.claim).to_string(),
                    supports: self.s(g.supports).to_string(),
                    check: match &g.check {
                        PCheck::None => None,
                        PCheck::Person(r) => Some(Check::Person {
                            reference: self.s(*r).to_string(),
                        }),
                        PCheck::Test(t) => Some(Check::Test {
                            reference: self.s(t.reference).to_string(),
                            verified_at_sha: self.s(t.verified_at_sha).to_string(),
                            counter_test: self.opt(t.counter_test).map(str::to_string),
                            liveness: Liveness {
                                platforms: list(&t.platforms),
                                triggered_by: list(&t.triggered_by),
                                surfaces: list(&t.surfaces),
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
            source_ref: self.source_ref.as_deref().cloned(),
            provenance: o(F::Provenance),
            supersedes: o(F::Supersedes),
            ratifies: o(F::Ratifies),
            unknown_keys: self.unknown_keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    fn s(&self, span: Span) -> &str {
        if span.len == NONE {
            return "";
        }
        let start = span.at as usize;
        self.text
            .get(start..start + span.len as usize)
            .unwrap_or_default()
    }

    fn opt(&self, span: Span) -> Option<&str> {
        (span.len != NONE).then(|| self.s(span))
    }

    fn f(&self, f: F) -> &str {
        self.s(self.fields[f as usize])
    }

    fn fo(&self, f: F) -> Option<&str> {
        self.opt(self.fields[f as usize])
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
        self.source_ref.as_deref().map(SourceRef::key)
    }
    pub fn is_agent_proposed(&self) -> bool {
        self.provenance() == Some(proto::vocab::AGENT_PROPOSED)
    }
    /// Whether some ground is a road not taken (`supports: rejected:<option>`).
    pub fn has_rejected_ground(&self) -> bool {
        self.grounds
            .iter()
            .any(|g| self.s(g.supports).starts_with("rejected:"))
    }
    pub fn has_test_check(&self) -> bool {
        self.grounds
            .iter()
            .any(|g| matches!(g.check, PCheck::Test(_)))
    }

    /// Ground `index`'s claim and supports (empty for an index out of range).
    pub fn ground_text(&self, index: usize) -> (&str, &str) {
        self.grounds
            .get(index)
            .map_or(("", ""), |g| (self.s(g.claim), self.s(g.supports)))
    }

    /// Each test binding: (ground index, selector, `triggered_by`).
    pub fn test_bindings(&self) -> impl Iterator<Item = (usize, &str, TriggeredBy<'_>)> {
        self.grounds
            .iter()
            .enumerate()
            .filter_map(move |(i, g)| match &g.check {
                PCheck::Test(t) => Some((
                    i,
                    self.s(t.reference),
                    TriggeredBy {
                        tick: self,
                        spans: &t.triggered_by,
                    },
                )),
                _ => None,
            })
    }
}

/// A test binding's `triggered_by` paths.
#[derive(Clone, Copy)]
pub struct TriggeredBy<'a> {
    tick: &'a PackedTick,
    spans: &'a [Span],
}

impl<'a> TriggeredBy<'a> {
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + '_ {
        let tick = self.tick;
        self.spans.iter().map(move |&s| tick.s(s))
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
              "liveness":{"platforms":["linux","mac"],"triggered_by":["db/","src/a.rs"],"surfaces":["api"]}}}],
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
        assert_eq!(b, vec![(2, "cargo test a", vec!["db/", "src/a.rs"])]);
        let bare = Tick::parse(
            r#"{"blame":"","decision":"","grounds":[],"held_since":"","id":"","observe":"","parent_id":"","status":""}"#,
        )
        .expect("a tick");
        assert_eq!(PackedTick::pack(&bare).tick(), bare);
    }
}
