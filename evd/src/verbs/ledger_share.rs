//! Each host's ledger, shared through git: `ev.ledger.publish` writes this host's
//! `events.jsonl` as `refs/evolving/ledger/<host>` (a child of what it published before, which
//! must be a byte prefix of what it publishes now); `ev.ledger.hosts` judges every other host's
//! copy a fetch brought against the copy last accepted from it, verifies the accepted ones'
//! chains and rules, checks them against what the other hosts witnessed of them, and keeps
//! them as the ones later fetches are judged by, journaling each newly accepted head as a
//! `ledger_witnessed` event. A rewritten or broken copy is refused, naming the host and the
//! first line at fault; the last good copy stays. This host's own ledger is held to what it
//! published and to what others witnessed of it (`ev.ledger.verify` and `ev.ledger.hosts`).
//! `ev.ledger.query` with `all_hosts` reads the accepted copies through [`accepted_copies`].
//!
//! What is known of each copy read (its head, its claims) is kept in
//! `results/imports/ledger-hosts.json`, so that judging copies already accepted reads nothing
//! but git's ref list. The git plumbing is [`crate::git::ledger_refs`]'s; the chain, its rules
//! and witness claims are [`crate::ledger`]'s. It must not run the network (the client fetches
//! and pushes).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use proto::rpc::{
    HostLedger, HostsLedgers, LedgerHostsRequest, LedgerPublishRequest, LedgerPublishResult,
    Refusal,
};
use serde::{Deserialize, Serialize};

use crate::git::ledger_refs::{self, Judged};
use crate::git::notes::update_ref;
use crate::ledger::witness::{self, Claim, Facts};
use crate::open::OpenStore;
use crate::sys::fsio;

fn git_err(e: String) -> Refusal {
    Refusal::io(format!("ledger publish: {e}"))
}

/// The bytes up to and with the last newline (a torn last line is not published).
fn whole_lines(bytes: &[u8]) -> &[u8] {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &[],
    }
}

fn events_in(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// `ev.ledger.publish`.
pub fn publish(
    store: &mut OpenStore,
    req: &LedgerPublishRequest,
) -> Result<LedgerPublishResult, Refusal> {
    store.require()?;
    crate::verbs::common::require_host_id(&req.host)?;
    // What this host has fetched of the others is witnessed first (journaled), so that what it
    // publishes anchors their heads too; a refused copy is `ledger verify --all-hosts`'s to say.
    if let Err(e) = judge_all(store, &req.host) {
        tracing::info!(error = %e.message, "other hosts' ledgers not judged before publishing");
    }
    // evd's own events waiting go first, so that what is published is what happened.
    store.write_journal();
    let all = store
        .ledger
        .read_bytes()
        .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?;
    let bytes = whole_lines(&all);
    if bytes.is_empty() {
        return Err(Refusal::refused(
            "ledger_empty",
            "the ledger holds no event yet: nothing to publish",
        ));
    }
    let read = crate::ledger::file::verify_text(&String::from_utf8_lossy(bytes));
    if let Some(b) = &read.broken {
        return Err(Refusal::refused(
            "ledger_broken",
            format!(
                "the ledger is broken at line {} ({}); it is not published — `evctl ledger verify` reports it",
                b.line, b.violation
            ),
        ));
    }
    let root = store.root().to_path_buf();
    let name = ledger_refs::ledger_ref(&req.host);
    let current = crate::git::run::git(&root, &["rev-parse", "--verify", "-q", &name]);
    if let Some(c) = &current {
        let published = ledger_refs::ledger_bytes(&root, c).map_err(git_err)?;
        if published == bytes {
            return Ok(LedgerPublishResult {
                ledger_ref: name,
                commit: c.clone(),
                events: events_in(bytes),
                unchanged: true,
            });
        }
        if !bytes.starts_with(&published) {
            return Err(Refusal::refused(
                "ledger_not_extended",
                format!(
                    "{name} holds a ledger this one does not extend (it differs from line {}): a published ledger is only ever extended, so it is not replaced",
                    first_difference(&published, bytes)
                ),
            ));
        }
    }
    let by = if req.by.trim().is_empty() {
        format!("evd@{}", req.host)
    } else {
        req.by.replace(['<', '>', '\n'], "")
    };
    let commit = ledger_refs::publish(
        &root,
        &req.host,
        bytes,
        (read.tail.seq, &read.tail.hash),
        current.as_deref(),
        (&req.host, &by),
    )
    .map_err(git_err)?;
    Ok(LedgerPublishResult {
        ledger_ref: name,
        commit,
        events: events_in(bytes),
        unchanged: false,
    })
}

fn first_difference(old: &[u8], new: &[u8]) -> u64 {
    let mut line = 1;
    for (a, b) in old
        .split_inclusive(|&c| c == b'\n')
        .zip(new.split_inclusive(|&c| c == b'\n'))
    {
        if a != b {
            break;
        }
        line += 1;
    }
    line
}

/// What is known of the copies read, by ledger commit (kept between runs).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Known {
    #[serde(default)]
    copies: BTreeMap<String, Facts>,
    /// `(commit, seq, hash)` found to hold: a claim checked once is not read for again.
    #[serde(default)]
    held: BTreeSet<(String, u64, String)>,
}

const KNOWN: &str = "ledger-hosts.json";

fn known_path(store: &OpenStore) -> PathBuf {
    store.results_dir().join("imports").join(KNOWN)
}

fn load_known(store: &OpenStore) -> Known {
    fsio::read_text_opt(&known_path(store))
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn save_known(store: &OpenStore, known: &Known) -> Result<(), String> {
    let path = known_path(store);
    let dir = path.parent().map(PathBuf::from).unwrap_or_default();
    fsio::ensure_dir(&dir).map_err(|e| format!("results/imports: {e}"))?;
    let tmp = store.tmp_dir().map_err(|r| r.message)?;
    let text = serde_json::to_string(known).map_err(|e| e.to_string())?;
    fsio::replace_atomically(&tmp, &path, text.as_bytes())
        .map_err(|e| format!("results/imports/{KNOWN}: {e}"))
}

/// The ledger refs of the repository, sorted out.
#[derive(Default)]
struct Refs {
    /// `(remote, host, commit)` of every fetched copy.
    fetched: Vec<(String, String, String)>,
    /// The copy last accepted, by `(remote, host)`.
    seen: BTreeMap<(String, String), String>,
    /// This host's published refs: `(ref, commit, Ev-Head)`.
    published: Vec<(String, String, String)>,
}

fn refs(store: &OpenStore) -> Result<Refs, Refusal> {
    let listed =
        ledger_refs::list(store.root()).map_err(|e| Refusal::io(format!("ledger hosts: {e}")))?;
    let mut r = Refs::default();
    for (commit, name, head) in listed {
        if let Some(rest) = name.strip_prefix("refs/evolving/remotes/") {
            if let Some((remote, host)) = rest.split_once("/ledger/") {
                r.fetched.push((remote.into(), host.into(), commit));
            }
        } else if let Some(rest) = name.strip_prefix("refs/evolving/seen/") {
            if let Some((remote, host)) = rest.split_once("/ledger/") {
                r.seen.insert((remote.into(), host.into()), commit);
            }
        } else if name.starts_with(ledger_refs::LEDGER_PREFIX) {
            r.published.push((name, commit, head));
        }
    }
    Ok(r)
}

/// Facts of a copy from its bytes (verified first: `Err` names the broken line).
fn facts_of(bytes: &[u8]) -> Result<Facts, (u64, String)> {
    let text = String::from_utf8_lossy(bytes);
    let read = crate::ledger::file::verify_text(&text);
    if let Some(b) = read.broken {
        return Err((b.line, b.violation.to_string()));
    }
    Ok(witness::facts(
        &text,
        read.lines,
        read.tail.seq,
        &read.tail.hash,
    ))
}

/// One fetched copy on its way through the judgement.
struct Candidate {
    row: HostLedger,
    /// The copy's facts when it may be accepted (verified, extending the last accepted).
    facts: Option<Facts>,
    /// Accepted before (the seen ref is at it): nothing to write.
    already: bool,
    seen: Option<String>,
}

fn row(remote: &str, host: &str, commit: &str) -> HostLedger {
    HostLedger {
        remote: remote.to_string(),
        host: host.to_string(),
        commit: commit.to_string(),
        ..HostLedger::default()
    }
}

fn refuse(row: &mut HostLedger, state: &str, line: Option<u64>, message: String) {
    row.state = state.into();
    row.line = line;
    row.message = message;
}

fn short(s: &str) -> &str {
    s.get(..12).unwrap_or(s)
}

/// `ev.ledger.hosts`.
pub fn hosts(store: &mut OpenStore, req: &LedgerHostsRequest) -> Result<HostsLedgers, Refusal> {
    store.require()?;
    if !req.host.is_empty() {
        crate::verbs::common::require_host_id(&req.host)?;
    }
    judge_all(store, &req.host)
}

/// Judge every fetched copy; accept (seen ref moved, head witnessed in the journal) those that
/// extend what was accepted, verify, and agree with every other host's witness.
fn judge_all(store: &mut OpenStore, own: &str) -> Result<HostsLedgers, Refusal> {
    let root = store.root().to_path_buf();
    let refs = refs(store)?;
    let mut known = load_known(store);
    let mut out: Vec<Candidate> = Vec::new();
    for (remote, host, commit) in &refs.fetched {
        let seen = refs.seen.get(&(remote.clone(), host.clone())).cloned();
        let mut c = Candidate {
            row: row(remote, host, commit),
            facts: None,
            already: false,
            seen: seen.clone(),
        };
        if host == own {
            // This host's own ledger fetched back: checked against the file, below.
            out.push(c);
            continue;
        }
        if seen.as_deref() == Some(commit.as_str()) {
            if let Some(f) = known.copies.get(commit) {
                c.facts = Some(f.clone());
                c.already = true;
                out.push(c);
                continue;
            }
        }
        match ledger_refs::judge(&root, seen.as_deref(), commit) {
            Err(e) => refuse(&mut c.row, "broken", None, format!("cannot be read: {e}")),
            Ok((Judged::Rewritten { line }, bytes)) => {
                c.row.events = events_in(&bytes);
                let seen_name = ledger_refs::seen_ref(remote, host);
                refuse(
                    &mut c.row,
                    "rewritten",
                    Some(line),
                    format!("host {host}'s ledger was rewritten: from line {line} it does not extend the copy accepted before (kept at {seen_name})"),
                );
            }
            Ok((j, bytes)) => {
                c.row.events = events_in(&bytes);
                match known
                    .copies
                    .get(commit)
                    .cloned()
                    .map(Ok)
                    .unwrap_or_else(|| facts_of(&bytes))
                {
                    Err((line, why)) => refuse(
                        &mut c.row,
                        "broken",
                        Some(line),
                        format!("host {host}'s ledger is broken at line {line} ({why})"),
                    ),
                    Ok(f) => {
                        c.already = j == Judged::Same;
                        known.copies.insert(commit.clone(), f.clone());
                        c.facts = Some(f);
                    }
                }
            }
        }
        out.push(c);
    }
    // Every claim any candidate copy makes about another host, with who made it.
    let mut claims: Vec<(String, String, Claim)> = Vec::new();
    for c in &out {
        if let Some(f) = &c.facts {
            for claim in &f.claims {
                if claim.host != c.row.host {
                    claims.push((c.row.host.clone(), c.row.remote.clone(), claim.clone()));
                }
            }
        }
    }
    // This host's own: each copy of it fetched back, and each claim about it, against the file.
    let mut own_rows: Vec<HostLedger> = Vec::new();
    let own_claims: Vec<(String, String, Claim)> = claims
        .iter()
        .filter(|(_, _, c)| !own.is_empty() && c.host == own)
        .cloned()
        .collect();
    let own_copies: Vec<usize> = (0..out.len()).filter(|&i| out[i].row.host == own).collect();
    if !own_copies.is_empty() || !own_claims.is_empty() {
        let mine = store
            .ledger
            .read_bytes()
            .map_err(|e| Refusal::io(format!("reading the ledger: {e}")))?;
        let mine = String::from_utf8_lossy(&mine).into_owned();
        for i in own_copies {
            let commit = out[i].row.commit.clone();
            let facts = match known.copies.get(&commit) {
                Some(f) => Ok(f.clone()),
                None => ledger_refs::ledger_bytes(&root, &commit)
                    .map_err(|e| (0, e))
                    .and_then(|b| facts_of(&b)),
            };
            let c = &mut out[i];
            match facts {
                Err((line, why)) => refuse(
                    &mut c.row,
                    "broken",
                    Some(line),
                    format!("this host's own ledger as published is broken ({why})"),
                ),
                Ok(f) => {
                    c.row.events = f.events;
                    let held = f.seq == 0
                        || witness::hashes_at(&mine, &[f.seq].into_iter().collect()).get(&f.seq)
                            == Some(&f.hash);
                    if held {
                        c.row.state = "ok".into();
                        c.row.message = format!(
                            "this host's ledger extends what it published ({} events)",
                            f.events
                        );
                        known.copies.insert(commit, f);
                    } else {
                        refuse(&mut c.row, "rewritten", Some(f.seq), format!(
                            "this host's ledger was rewritten: it does not hold event {} as published at {} (the ledger here differs from that line on)",
                            f.seq, short(&commit)));
                    }
                }
            }
        }
        let seqs: BTreeSet<u64> = own_claims.iter().map(|(_, _, c)| c.seq).collect();
        let hashes = witness::hashes_at(&mine, &seqs);
        for (by, remote, claim) in own_claims {
            if hashes.get(&claim.seq) == Some(&claim.hash) {
                continue;
            }
            let mut r = row(&remote, own, "");
            r.witness = by.clone();
            refuse(&mut r, "rewritten", Some(claim.seq), format!(
                "this host's ledger was rewritten: host {by} witnessed its event {} as {}, and the ledger here {} it",
                claim.seq, short(&claim.hash),
                if hashes.contains_key(&claim.seq) { "differs at" } else { "ends before" }));
            own_rows.push(r);
        }
    }
    // Each other host's copy against what the others witnessed of it.
    for o in &mut out {
        let (host, remote, commit) = (
            o.row.host.clone(),
            o.row.remote.clone(),
            o.row.commit.clone(),
        );
        let Some(f) = o.facts.clone() else {
            continue;
        };
        if host == own {
            continue;
        }
        let about: Vec<&(String, String, Claim)> = claims
            .iter()
            .filter(|(by, _, c)| c.host == host && *by != host)
            .collect();
        let mut wanted: BTreeSet<u64> = BTreeSet::new();
        let mut fault: Option<(String, Claim, bool)> = None;
        for (by, by_remote, c) in &about {
            if c.seq > f.seq {
                // Seen longer than this copy is: cut back, when both came from the same remote
                // (a copy from another remote may simply be older).
                if *by_remote == remote && fault.is_none() {
                    fault = Some((by.clone(), c.clone(), false));
                }
                continue;
            }
            if c.seq == f.seq {
                if c.hash != f.hash && fault.is_none() {
                    fault = Some((by.clone(), c.clone(), true));
                }
                continue;
            }
            if !known
                .held
                .contains(&(commit.clone(), c.seq, c.hash.clone()))
            {
                wanted.insert(c.seq);
            }
        }
        if fault.is_none() && !wanted.is_empty() {
            // Read again rather than kept from the judgement: a fleet's copies are long, and
            // holding every one at once is what a daemon must not do.
            let bytes = match ledger_refs::ledger_bytes(&root, &commit) {
                Ok(b) => b,
                Err(e) => {
                    o.facts = None;
                    refuse(&mut o.row, "broken", None, format!("cannot be read: {e}"));
                    continue;
                }
            };
            let hashes = witness::hashes_at(&String::from_utf8_lossy(&bytes), &wanted);
            for (by, _, c) in &about {
                if !wanted.contains(&c.seq) {
                    continue;
                }
                match hashes.get(&c.seq) {
                    Some(h) if *h == c.hash => {
                        known.held.insert((commit.clone(), c.seq, c.hash.clone()));
                    }
                    got => {
                        if fault.is_none() {
                            fault = Some((by.clone(), c.clone(), got.is_some()));
                        }
                    }
                }
            }
        }
        if let Some((by, c, differs)) = fault {
            o.facts = None;
            o.row.witness = by.clone();
            refuse(&mut o.row, "rewritten", Some(c.seq), format!(
                "host {host}'s ledger was rewritten: host {by} witnessed its event {} as {} (at {}), and this copy {} it",
                c.seq, short(&c.hash), short(&c.commit),
                if differs { "differs at" } else { "ends before" }));
        }
    }
    // Accept what stands: the seen ref moved, the head witnessed.
    let mut hosts = HostsLedgers::default();
    for c in out {
        let mut row = c.row;
        if let Some(f) = c.facts {
            if !c.already {
                let seen_name = ledger_refs::seen_ref(&row.remote, &row.host);
                update_ref(&root, &seen_name, &row.commit, c.seen.as_deref())
                    .map_err(|e| Refusal::io(format!("ledger hosts: {e}")))?;
                store.journal(
                    witness::WITNESSED,
                    witness::payload(&row.host, &row.remote, &row.commit, &f),
                );
            }
            row.events = f.events;
            row.state = "ok".into();
            row.message = format!("host {}'s ledger verifies", row.host);
        }
        hosts.hosts.push(row);
    }
    hosts.hosts.extend(own_rows);
    // Only what the refs still name is worth remembering.
    let live: BTreeSet<&String> = refs
        .fetched
        .iter()
        .map(|(_, _, c)| c)
        .chain(refs.seen.values())
        .collect();
    known.copies.retain(|c, _| live.contains(c));
    known.held.retain(|(c, _, _)| live.contains(c));
    if let Err(e) = save_known(store, &known) {
        tracing::info!(error = %e, "what is known of other hosts' ledgers is not kept");
    }
    store.write_journal();
    Ok(hosts)
}

/// The copies of other hosts' ledgers accepted so far (one per host: the longest, whatever
/// remote it came through), as `(host, commit, events)`; `own` (this host) left out.
pub fn accepted(store: &OpenStore, own: &str) -> Result<Vec<(String, String, u64)>, Refusal> {
    let refs = refs(store)?;
    let known = load_known(store);
    let mut best: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for ((_, host), commit) in &refs.seen {
        if host == own {
            continue;
        }
        let n = known.copies.get(commit).map_or(0, |f| f.events);
        let e = best.entry(host.clone()).or_insert((n, commit.clone()));
        if n > e.0 {
            *e = (n, commit.clone());
        }
    }
    Ok(best
        .into_iter()
        .map(|(host, (events, commit))| (host, commit, events))
        .collect())
}

/// The bytes of the ledger copy at `commit`.
pub fn copy_bytes(root: &std::path::Path, commit: &str) -> Result<Vec<u8>, String> {
    ledger_refs::ledger_bytes(root, commit).map_err(|e| format!("reading a host's ledger: {e}"))
}

/// A fault of this host's ledger against what it published (`refs/evolving/ledger/*`, whose
/// commits name their last event): the file must still hold each published head.
pub fn published_fault(store: &OpenStore) -> Option<crate::ledger::Broken> {
    let refs = refs(store).ok()?;
    let heads: Vec<(String, String, u64, String)> = refs
        .published
        .iter()
        .filter_map(|(name, commit, head)| {
            let (seq, hash) = ledger_refs::parse_head(head)?;
            Some((name.clone(), commit.clone(), seq, hash))
        })
        .collect();
    if heads.is_empty() {
        return None;
    }
    let bytes = store.ledger.read_bytes().ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let seqs: BTreeSet<u64> = heads.iter().map(|h| h.2).collect();
    let hashes = witness::hashes_at(&text, &seqs);
    let lines = text.lines().count() as u64;
    heads.into_iter().find_map(|(name, commit, seq, hash)| {
        let got = hashes.get(&seq);
        (got != Some(&hash)).then(|| crate::ledger::Broken {
            line: lines.min(seq.max(1)),
            violation: crate::ledger::Violation {
                rule: "published",
                message: format!(
                    "this host published its ledger as {name} at {} with event {seq} as {}; the file here {} it: it was rewritten after it was published",
                    short(&commit),
                    short(&hash),
                    if got.is_some() { "differs at" } else { "ends before" }
                ),
            },
        })
    })
}
