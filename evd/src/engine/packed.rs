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

use std::sync::Arc;

use proto::model::{Check, Ground, Liveness, SourceRef};
use proto::Tick;

/// The top-level strings, in the order they are laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
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
const ALL_FIELDS: [F; FIELDS] = [
    F::Decision,
    F::Observe,
    F::ParentId,
    F::Id,
    F::Status,
    F::HeldSince,
    F::Blame,
    F::Authority,
    F::Jurisdiction,
    F::Provenance,
    F::Supersedes,
    F::Ratifies,
];
/// The first optional field: fields from here on may be absent (a bit in `index[0]`).
const FIRST_OPTIONAL: usize = F::Authority as usize;
/// Where the top-level strings' ends start in the index.
const ENDS_AT: usize = 2;

/// The top-level fields that may be kept as a number of the shared table
/// ([`crate::engine::interned`]) rather than in the text: few distinct values, spelled by every tick.
const NUMBERED_FIELDS: [F; 5] = [
    F::Status,
    F::Blame,
    F::Authority,
    F::Jurisdiction,
    F::Provenance,
];
/// In `index[0]`: bit `NUMBERED_AT + j` says `NUMBERED_FIELDS[j]` is kept as a number.
const NUMBERED_AT: u32 = 8;
/// In `index[0]`: some ground's claim holds an evidence marker (`proto::evidence::OPEN`).
const CITES: u32 = 1 << 14;

const KIND_NONE: u32 = 0;
const KIND_PERSON: u32 = 1;
const KIND_TEST: u32 = 2;
/// In a ground's header: the test binding has a counter-test.
const HAS_COUNTER: u32 = 4;
/// In a ground's header: its `supports` is a number.
const SUPPORTS_NUMBERED: u32 = 8;
/// In a ground's header: its person's ref is a number.
const REF_NUMBERED: u32 = 16;
/// In a ground's header: its `verified_at_sha` is a number.
const SHA_NUMBERED: u32 = 32;
/// In a ground's header: every item of its platforms, triggered_by, surfaces list is a number.
const LIST_NUMBERED: [u32; 3] = [64, 128, 256];

/// One tick, packed (see the module docs).
///
/// `text` holds every string, one after the other, except those kept as a number of the shared
/// table ([`crate::engine::interned`]). `index` says where each ends (or its number) and how the
/// grounds are shaped:
///
/// - `[0]`: which optional fields are present (bit `k` for field `FIRST_OPTIONAL + k`), and
///   which of [`NUMBERED_FIELDS`] are numbers (bit [`NUMBERED_AT`]` + j`);
/// - `[1]`: the number of grounds;
/// - `[2..14]`: the end of each top-level string (an absent or numbered one is empty);
/// - the number of each numbered top-level field, in [`NUMBERED_FIELDS`] order;
/// - then per ground: a header (its kind, [`HAS_COUNTER`], which of its strings are numbers);
///   for a test binding the lengths of its platforms, triggered_by and surfaces lists; then
///   the end (or number) of each of its strings: claim, supports, and the person's ref, or the
///   test's ref, verified_at_sha, counter_test (empty when absent) and each list's items.
#[derive(Debug)]
pub struct PackedTick {
    text: Text,
    index: Index,
    /// The decision identity ([`crate::engine::view::identity_of`] the tick), for the view's collapse.
    identity: crate::engine::view::Identity,
    /// What few ticks have (a `source_ref`, keys this version does not know), kept as it is.
    rare: Option<Box<Rare>>,
}

/// A tick's text: its own, or a stretch of the tick image it was taken back from, shared by
/// every tick of that image (a restart then allocates and copies no text: on a cold heap that
/// was a fault per page of it).
enum Text {
    Own(Box<str>),
    InImage {
        image: Arc<Vec<u8>>,
        at: usize,
        len: u32,
    },
}

impl Text {
    /// `s` as the stretch of `image` it is; `None` when it lies elsewhere.
    fn in_image(image: &Arc<Vec<u8>>, s: &str) -> Option<Text> {
        let at = (s.as_ptr() as usize).checked_sub(image.as_ptr() as usize)?;
        let len = u32::try_from(s.len()).ok()?;
        let end = at.checked_add(s.len())?;
        (image.get(at..end)?.as_ptr() == s.as_ptr()).then(|| Text::InImage {
            image: Arc::clone(image),
            at,
            len,
        })
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Text::Own(s) => s,
            Text::InImage { image, at, len } => {
                let bytes = image.get(*at..*at + *len as usize).unwrap_or_default();
                // SAFETY: made only from a `&str` found to be exactly these bytes of the image
                // ([`Text::in_image`]), and an image is never changed once shared.
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
        }
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
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
    fn of(index: &[u32]) -> Index {
        if index.iter().all(|&n| n <= u32::from(u16::MAX)) {
            Index::Narrow(index.iter().map(|&n| n as u16).collect())
        } else {
            Index::Wide(index.into())
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

    /// Set entry `i` to `n`; `None` when there is no such entry or `n` does not fit.
    fn set(&mut self, i: usize, n: u32) -> Option<()> {
        match self {
            Index::Narrow(v) => *v.get_mut(i)? = u16::try_from(n).ok()?,
            Index::Wide(v) => *v.get_mut(i)? = n,
        }
        Some(())
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

/// Appends strings to the buffer being built, and their ends (or numbers) to the index.
#[derive(Default)]
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

    /// `s` as a number when it has one (`true`), else in the text.
    fn put_numbered(&mut self, s: &str) -> bool {
        match crate::engine::interned::number(s) {
            Some(n) => {
                self.index.push(n);
                true
            }
            None => {
                self.put(s);
                false
            }
        }
    }

    /// A list: as numbers when every item has one (`true`), else in the text.
    fn put_list(&mut self, items: &[String]) -> bool {
        let numbers: Option<Vec<u32>> = items
            .iter()
            .map(|i| crate::engine::interned::number(i))
            .collect();
        match numbers {
            Some(n) => {
                self.index.extend(n);
                true
            }
            None => {
                for i in items {
                    self.put(i);
                }
                false
            }
        }
    }
}

thread_local! {
    /// The buffers a tick is built in before it is copied out at its exact size: packing
    /// leaves no slack and no freed buffer behind each tick kept.
    static SCRATCH: std::cell::RefCell<Builder> = std::cell::RefCell::new(Builder::default());
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
/// starting at `start`; or, when `numbered`, the numbers of its items in the shared table.
#[derive(Clone, Copy)]
pub struct StrList<'a> {
    text: &'a str,
    start: u32,
    ends: Ends<'a>,
    numbered: bool,
}

impl<'a> StrList<'a> {
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + 'a {
        let text = self.text;
        let numbered = self.numbered;
        let mut start = self.start;
        self.ends.iter().map(move |end| {
            if numbered {
                return crate::engine::interned::text(end);
            }
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

    /// The next string, kept as a number.
    fn next_number(&mut self) -> &'a str {
        let n = self.tick.index.get(self.at).unwrap_or(u32::MAX);
        self.at += 1;
        crate::engine::interned::text(n)
    }

    /// The next string: a number when `numbered`, else in the text.
    fn next(&mut self, numbered: bool) -> &'a str {
        if numbered {
            self.next_number()
        } else {
            self.next_str()
        }
    }

    fn list(&mut self, n: u32, numbered: bool) -> StrList<'a> {
        let n = n as usize;
        let list = StrList {
            text: &self.tick.text,
            start: self.start,
            ends: self.tick.index.ends(self.at, self.at + n),
            numbered,
        };
        if !numbered {
            if let Some(end) = list.ends.last() {
                self.start = end;
            }
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
        let supports = self.next(header & SUPPORTS_NUMBERED != 0);
        let check = match header & 3 {
            KIND_PERSON => CheckRef::Person(self.next(header & REF_NUMBERED != 0)),
            KIND_TEST => {
                let reference = self.next_str();
                let verified_at_sha = self.next(header & SHA_NUMBERED != 0);
                let counter = self.next_str();
                let [p, t, s] = LIST_NUMBERED.map(|bit| header & bit != 0);
                CheckRef::Test {
                    reference,
                    verified_at_sha,
                    counter_test: (header & HAS_COUNTER != 0).then_some(counter),
                    platforms: self.list(counts[0], p),
                    triggered_by: self.list(counts[1], t),
                    surfaces: self.list(counts[2], s),
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
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut b) => Self::pack_in(t, &mut b),
            // Never nested; a fresh builder all the same if it were.
            Err(_) => Self::pack_in(t, &mut Builder::default()),
        })
    }

    fn pack_in(t: &Tick, b: &mut Builder) -> PackedTick {
        b.text.clear();
        b.index.clear();
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
        let cites = t
            .grounds
            .iter()
            .any(|g| g.claim.contains(proto::evidence::OPEN));
        b.index.push(present | if cites { CITES } else { 0 });
        b.index
            .push(u32::try_from(t.grounds.len()).unwrap_or(u32::MAX));
        let top = |f: F| -> Option<&str> {
            match f {
                F::Decision => Some(&t.decision),
                F::Observe => Some(&t.observe),
                F::ParentId => Some(&t.parent_id),
                F::Id => Some(&t.id),
                F::Status => Some(&t.status),
                F::HeldSince => Some(&t.held_since),
                F::Blame => Some(&t.blame),
                F::Authority => t.authority.as_deref(),
                F::Jurisdiction => t.jurisdiction.as_deref(),
                F::Provenance => t.provenance.as_deref(),
                F::Supersedes => t.supersedes.as_deref(),
                F::Ratifies => t.ratifies.as_deref(),
            }
        };
        // The numbered fields first (their numbers follow the ends), each then empty in the
        // text; an absent optional field is empty and gets no number.
        let mut numbers = Vec::new();
        for (j, f) in NUMBERED_FIELDS.iter().enumerate() {
            if let Some(n) = top(*f).and_then(crate::engine::interned::number) {
                b.index[0] |= 1 << (NUMBERED_AT + j as u32);
                numbers.push(n);
            }
        }
        for f in ALL_FIELDS {
            let numbered = NUMBERED_FIELDS
                .iter()
                .position(|n| *n == f)
                .is_some_and(|j| b.index[0] & 1 << (NUMBERED_AT + j as u32) != 0);
            b.put(if numbered {
                ""
            } else {
                top(f).unwrap_or_default()
            });
        }
        b.index.extend(numbers);
        for g in &t.grounds {
            let header_at = b.index.len();
            match &g.check {
                None => {
                    b.index.push(KIND_NONE);
                    b.put(&g.claim);
                    if b.put_numbered(&g.supports) {
                        b.index[header_at] |= SUPPORTS_NUMBERED;
                    }
                }
                Some(Check::Person { reference }) => {
                    b.index.push(KIND_PERSON);
                    b.put(&g.claim);
                    if b.put_numbered(&g.supports) {
                        b.index[header_at] |= SUPPORTS_NUMBERED;
                    }
                    if b.put_numbered(reference) {
                        b.index[header_at] |= REF_NUMBERED;
                    }
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
                    if b.put_numbered(&g.supports) {
                        b.index[header_at] |= SUPPORTS_NUMBERED;
                    }
                    b.put(reference);
                    if b.put_numbered(verified_at_sha) {
                        b.index[header_at] |= SHA_NUMBERED;
                    }
                    b.put(counter_test.as_deref().unwrap_or_default());
                    for (l, bit) in lists.into_iter().zip(LIST_NUMBERED) {
                        if b.put_list(l) {
                            b.index[header_at] |= bit;
                        }
                    }
                }
            }
        }
        PackedTick {
            text: Text::Own(b.text.as_str().into()),
            index: Index::of(&b.index),
            identity: crate::engine::view::identity_of(t),
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
            at: ENDS_AT + FIELDS + self.numbered_fields(),
            start: self.index.get(ENDS_AT + FIELDS - 1).unwrap_or(0),
            left: self.index.get(1).unwrap_or(0),
        }
    }

    fn f(&self, f: F) -> &str {
        let k = f as usize;
        let flags = self.index.get(0).unwrap_or(0);
        if let Some(j) = NUMBERED_FIELDS.iter().position(|n| *n == f) {
            if flags & 1 << (NUMBERED_AT + j as u32) != 0 {
                // Its number sits after the ends, among the numbered fields before it.
                let before = (0..j)
                    .filter(|i| flags & 1 << (NUMBERED_AT + *i as u32) != 0)
                    .count();
                let n = self
                    .index
                    .get(ENDS_AT + FIELDS + before)
                    .unwrap_or(u32::MAX);
                return crate::engine::interned::text(n);
            }
        }
        let start = match k {
            0 => 0,
            _ => self.index.get(ENDS_AT + k - 1).unwrap_or(0),
        };
        let end = self.index.get(ENDS_AT + k).unwrap_or(start);
        slice(&self.text, start, end)
    }

    /// Whether some ground's claim holds an evidence marker (checked at every write door).
    pub fn cites_evidence(&self) -> bool {
        self.index.get(0).unwrap_or(0) & CITES != 0
    }

    /// How many top-level fields are kept as numbers.
    fn numbered_fields(&self) -> usize {
        let flags = self.index.get(0).unwrap_or(0);
        (flags >> NUMBERED_AT & 0b11111).count_ones() as usize
    }

    fn fo(&self, f: F) -> Option<&str> {
        let bit = (f as usize).checked_sub(FIRST_OPTIONAL)?;
        let present = self.index.get(0).unwrap_or(0);
        (present & (1 << bit) != 0).then(|| self.f(f))
    }

    pub fn identity(&self) -> crate::engine::view::Identity {
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

/// The shared-table texts an image of packed ticks names, each by its number in the image
/// (the table's own numbers belong to one process: an image carries the texts).
#[derive(Debug, Default)]
pub struct ImageTexts {
    by_number: std::collections::HashMap<u32, u32>,
    texts: Vec<&'static str>,
}

impl ImageTexts {
    fn image_number(&mut self, n: u32) -> u32 {
        let next = u32::try_from(self.texts.len()).unwrap_or(u32::MAX);
        *self.by_number.entry(n).or_insert_with(|| {
            self.texts.push(crate::engine::interned::text(n));
            next
        })
    }

    /// Write the texts, in image order.
    pub fn encode(&self, w: &mut crate::engine::codec::Writer) {
        w.u32(u32::try_from(self.texts.len()).unwrap_or(u32::MAX));
        for t in &self.texts {
            w.str(t);
        }
    }

    /// Read texts written by [`ImageTexts::encode`]: for each image number, this process'
    /// number of the same text. `None` when the image is damaged or the table is full.
    pub fn decode(r: &mut crate::engine::codec::Reader<'_>) -> Option<Vec<u32>> {
        let n = r.count(4)?;
        (0..n)
            .map(|_| crate::engine::interned::number(r.str()?))
            .collect()
    }
}

impl PackedTick {
    /// The places in the index that hold a number of the shared table (rather than where a
    /// string ends), in order. Bounded by the index whatever it holds.
    fn number_slots(&self) -> Vec<usize> {
        let mut slots: Vec<usize> = (0..self.numbered_fields())
            .map(|j| ENDS_AT + FIELDS + j)
            .collect();
        let len = self.index.len();
        let mut at = ENDS_AT + FIELDS + self.numbered_fields();
        for _ in 0..self.index.get(1).unwrap_or(0) {
            let Some(header) = self.index.get(at) else {
                break;
            };
            at += 1;
            let counts = if header & 3 == KIND_TEST {
                let c = [0, 1, 2].map(|k| self.index.get(at + k).unwrap_or(0) as usize);
                at += 3;
                c
            } else {
                [0; 3]
            };
            at += 1; // claim
            if header & SUPPORTS_NUMBERED != 0 {
                slots.push(at);
            }
            at += 1;
            match header & 3 {
                KIND_PERSON => {
                    if header & REF_NUMBERED != 0 {
                        slots.push(at);
                    }
                    at += 1;
                }
                KIND_TEST => {
                    at += 1; // reference
                    if header & SHA_NUMBERED != 0 {
                        slots.push(at);
                    }
                    at += 2; // verified_at_sha, counter_test
                    for (n, bit) in counts.into_iter().zip(LIST_NUMBERED) {
                        if header & bit != 0 {
                            slots.extend((at..at.saturating_add(n)).take_while(|&i| i < len));
                        }
                        at = at.saturating_add(n);
                    }
                }
                _ => {}
            }
            if at >= len {
                break;
            }
        }
        slots.retain(|&i| i < len);
        slots
    }

    /// Write this tick into an image (see [`crate::engine::codec`]), its shared-table numbers
    /// as `texts` numbers them.
    pub fn encode(&self, w: &mut crate::engine::codec::Writer, texts: &mut ImageTexts) {
        let slots = self.number_slots();
        w.str(&self.text);
        let (narrow, len) = match &self.index {
            Index::Narrow(v) => (true, v.len()),
            Index::Wide(v) => (false, v.len()),
        };
        w.bool(narrow);
        w.u32(u32::try_from(len).unwrap_or(u32::MAX));
        let mut slot = slots.iter().peekable();
        for i in 0..len {
            let mut n = self.index.get(i).unwrap_or(0);
            if slot.next_if_eq(&&i).is_some() {
                n = texts.image_number(n);
            }
            if narrow {
                w.u16(u16::try_from(n).unwrap_or(u16::MAX));
            } else {
                w.u32(n);
            }
        }
        w.bytes(&self.identity);
        match self.rare.as_deref() {
            None => w.u8(0),
            Some(rare) => {
                match &rare.source_ref {
                    None => w.u8(1),
                    Some(SourceRef::Text(t)) => {
                        w.u8(2);
                        w.str(t);
                    }
                    Some(r @ SourceRef::Object(_)) => {
                        w.u8(3);
                        w.str(&r.key());
                    }
                }
                w.u32(u32::try_from(rare.unknown_keys.len()).unwrap_or(u32::MAX));
                for k in &rare.unknown_keys {
                    w.str(k);
                }
            }
        }
    }

    /// Read a tick written by [`PackedTick::encode`]; `numbers` maps the image's text numbers
    /// to this process' ([`ImageTexts::decode`]). With the `image` the reader reads, the tick's
    /// text is that stretch of it rather than a copy. `None` for a damaged image.
    pub fn decode(
        r: &mut crate::engine::codec::Reader<'_>,
        numbers: &[u32],
        image: Option<&Arc<Vec<u8>>>,
    ) -> Option<PackedTick> {
        let s = r.str()?;
        let text = match image.and_then(|image| Text::in_image(image, s)) {
            Some(t) => t,
            None => Text::Own(s.into()),
        };
        let index = if r.bool()? {
            let n = r.count(2)?;
            Index::Narrow((0..n).map(|_| r.u16()).collect::<Option<_>>()?)
        } else {
            let n = r.count(4)?;
            Index::Wide((0..n).map(|_| r.u32()).collect::<Option<_>>()?)
        };
        let identity: crate::engine::view::Identity = r.bytes()?.try_into().ok()?;
        let rare = match r.u8()? {
            0 => None,
            kind => {
                let source_ref = match kind {
                    1 => None,
                    2 => Some(SourceRef::Text(r.str()?.to_string())),
                    3 => match serde_json::from_str(r.str()?).ok()? {
                        serde_json::Value::Object(m) => Some(SourceRef::Object(m)),
                        _ => return None,
                    },
                    _ => return None,
                };
                let n = r.count(4)?;
                let unknown_keys = (0..n)
                    .map(|_| r.str().map(Box::from))
                    .collect::<Option<_>>()?;
                Some(Box::new(Rare {
                    source_ref,
                    unknown_keys,
                }))
            }
        };
        let mut tick = PackedTick {
            text,
            index,
            identity,
            rare,
        };
        for i in tick.number_slots() {
            let image_number = tick.index.get(i)?;
            tick.index.set(i, *numbers.get(image_number as usize)?)?;
        }
        Some(tick)
    }
}

impl crate::engine::view::ViewKeys for PackedTick {
    fn supersedes(&self) -> Option<&str> {
        PackedTick::supersedes(self)
    }
    fn held_since(&self) -> &str {
        PackedTick::held_since(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_of_a_packed_tick_reads_back_as_the_same_tick() {
        use crate::engine::codec::{Reader, Writer};
        let text = r#"{"authority":"user-ruled","blame":"Wang Yu","decision":"d","grounds":[
            {"claim":"c0","supports":"chosen","check":{"by":"person","ref":"when"}},
            {"claim":"r","supports":"rejected:x"},
            {"claim":"c2","supports":"chosen","check":{"by":"test","ref":"cargo test a",
              "verified_at_sha":"0123456789abcdef0123456789abcdef01234567","counter_test":"cargo test b",
              "liveness":{"platforms":["linux","mac"],"triggered_by":["db/","src/a.rs"],"surfaces":["api"]}}},
            {"claim":"c3","supports":"chosen","check":{"by":"test","ref":"cargo test c",
              "verified_at_sha":"0123456789abcdef0123456789abcdef01234568",
              "liveness":{"platforms":["local"],"triggered_by":["yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"],"surfaces":["cli"]}}}],
            "held_since":"2026-01-01T00:00:00Z","id":"bbbbbbbbbbbb","observe":"","parent_id":"aaaaaaaaaaaa",
            "status":"live"}"#;
        let t = Tick::parse(text).expect("a tick");
        let p = PackedTick::pack(&t);
        let mut texts = ImageTexts::default();
        let mut body = Writer::new();
        p.encode(&mut body, &mut texts);
        p.encode(&mut body, &mut texts); // twice, sharing the texts
        let mut w = Writer::new();
        texts.encode(&mut w);
        let table = w.finish();
        let body = body.finish();
        assert!(texts.texts.contains(&"user-ruled") && texts.texts.contains(&"linux"));
        assert!(
            !texts.texts.iter().any(|t| t.len() > 64),
            "long texts stay in the tick"
        );
        let numbers =
            ImageTexts::decode(&mut Reader::checked(&table).expect("table")).expect("texts");
        let mut r = Reader::checked(&body).expect("body");
        for _ in 0..2 {
            let back = PackedTick::decode(&mut r, &numbers, None).expect("decodes");
            assert_eq!(back.tick(), t);
            assert_eq!(back.identity(), p.identity());
        }
        assert!(r.at_end());
        // Decoded with its image, a tick's text is that stretch of the image, not a copy.
        let image = Arc::new(body.clone());
        let mut r = Reader::checked(&image).expect("body");
        for _ in 0..2 {
            let back = PackedTick::decode(&mut r, &numbers, Some(&image)).expect("decodes");
            assert!(matches!(back.text, Text::InImage { .. }));
            assert_eq!(back.tick(), t);
        }
        // A reader over other bytes than the image given: the text is copied.
        let mut r = Reader::checked(&body).expect("body");
        let back = PackedTick::decode(&mut r, &numbers, Some(&image)).expect("decodes");
        assert!(matches!(back.text, Text::Own(_)));
        assert_eq!(back.tick(), t);
        // An image number the table does not have is a damaged image.
        assert!(
            PackedTick::decode(&mut Reader::checked(&body).expect("body"), &[], None).is_none()
        );
        for extra in [
            r#""zz":1"#,
            r#""source_ref":"R1""#,
            r#""source_ref":{"k":[1,"x"]},"y":2"#,
        ] {
            let rare = Tick::parse(
                &text.replace(r#""status":"live""#, &format!(r#""status":"live",{extra}"#)),
            )
            .expect("a tick");
            assert_eq!(round_trip(&rare), Some(rare), "{extra}");
        }
    }

    /// `t` packed, written into an image with its own table of texts, and read back.
    fn round_trip(t: &Tick) -> Option<Tick> {
        use crate::engine::codec::{Reader, Writer};
        let mut texts = ImageTexts::default();
        let mut body = Writer::new();
        PackedTick::pack(t).encode(&mut body, &mut texts);
        let mut w = Writer::new();
        texts.encode(&mut w);
        let table = w.finish();
        let numbers = ImageTexts::decode(&mut Reader::checked(&table)?)?;
        let body = body.finish();
        PackedTick::decode(&mut Reader::checked(&body)?, &numbers, None).map(|p| p.tick())
    }

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
    fn texts_too_long_for_a_number_stay_in_the_text_beside_numbered_ones() {
        let long = "l".repeat(crate::engine::interned::MAX_LEN + 1);
        let text = format!(
            r#"{{"authority":"{long}","blame":"","decision":"d","grounds":[
            {{"claim":"c0","supports":"rejected:{long}","check":{{"by":"person","ref":"{long}"}}}},
            {{"claim":"c1","supports":"chosen","check":{{"by":"person","ref":"q3"}}}},
            {{"claim":"c2","supports":"chosen","check":{{"by":"test","ref":"t","verified_at_sha":"0123456789abcdef0123456789abcdef01234567",
              "liveness":{{"platforms":["linux","{long}"],"triggered_by":["a/"],"surfaces":["api"]}}}}}}],
            "held_since":"h","id":"bbbbbbbbbbbb","jurisdiction":"A","observe":"o","parent_id":"aaaaaaaaaaaa",
            "provenance":"imported","status":"live"}}"#
        );
        let t = Tick::parse(&text).expect("a tick");
        let p = PackedTick::pack(&t);
        assert_eq!(p.tick(), t);
        assert_eq!(p.authority(), Some(long.as_str()));
        assert_eq!(p.jurisdiction(), Some("A"));
        assert_eq!(p.blame(), "");
        assert_eq!(p.status(), "live");
        assert_eq!(p.decision(), "d");
        assert_eq!(p.id(), "bbbbbbbbbbbb");
        assert_eq!(
            p.ground_text(0),
            ("c0", format!("rejected:{long}").as_str())
        );
        assert_eq!(p.ground_text(2), ("c2", "chosen"));
        assert!(
            p.text.len() > 3 * long.len(),
            "the long ones are in the text"
        );
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
