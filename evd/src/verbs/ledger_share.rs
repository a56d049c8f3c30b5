//! Each host's ledger, shared through git: `ev.ledger.publish` writes this host's
//! `events.jsonl` as `refs/evolving/ledger/<host>` (a child of what it published before, which
//! must be a byte prefix of what it publishes now); `ev.ledger.hosts` judges every other host's
//! copy a fetch brought against the copy last accepted from it, verifies the accepted ones'
//! chains and rules, and keeps them as the ones later fetches are judged by. A rewritten or
//! broken copy is refused, naming the host and the first line at fault; the last good copy
//! stays.
//!
//! The git plumbing is [`crate::git::ledger_refs`]'s; the chain and its rules are
//! [`crate::ledger`]'s. It must not run the network (the client fetches and pushes).

use proto::rpc::{HostLedger, HostsLedgers, LedgerPublishRequest, LedgerPublishResult, Refusal};

use crate::git::ledger_refs::{self, Judged};
use crate::git::notes::update_ref;
use crate::open::OpenStore;

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

/// `ev.ledger.hosts`.
pub fn hosts(store: &mut OpenStore) -> Result<HostsLedgers, Refusal> {
    store.require()?;
    let root = store.root().to_path_buf();
    let listed = crate::git::run::git_ok(
        &root,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname)",
            "refs/evolving/remotes/",
        ],
    )
    .ok_or_else(|| Refusal::io("ledger hosts: git for-each-ref failed"))?;
    let mut out = HostsLedgers::default();
    for line in listed.lines() {
        let Some((commit, name)) = line.split_once(' ') else {
            continue;
        };
        let Some(rest) = name.strip_prefix("refs/evolving/remotes/") else {
            continue;
        };
        let Some((remote, host)) = rest.split_once("/ledger/") else {
            continue;
        };
        let seen_name = ledger_refs::seen_ref(remote, host);
        let seen = crate::git::run::git(&root, &["rev-parse", "--verify", "-q", &seen_name]);
        let mut row = HostLedger {
            remote: remote.to_string(),
            host: host.to_string(),
            commit: commit.to_string(),
            ..HostLedger::default()
        };
        match ledger_refs::judge(&root, seen.as_deref(), commit) {
            Err(e) => {
                row.state = "broken".into();
                row.message = format!("cannot be read: {e}");
            }
            Ok((Judged::Rewritten { line }, bytes)) => {
                row.events = events_in(&bytes);
                row.state = "rewritten".into();
                row.line = Some(line);
                row.message = format!(
                    "host {host}'s ledger was rewritten: from line {line} it does not extend the copy accepted before (kept at {seen_name})"
                );
            }
            Ok((_, bytes)) => {
                row.events = events_in(&bytes);
                let read = crate::ledger::file::verify_text(&String::from_utf8_lossy(&bytes));
                match read.broken {
                    Some(b) => {
                        row.state = "broken".into();
                        row.line = Some(b.line);
                        row.message = format!(
                            "host {host}'s ledger is broken at line {} ({})",
                            b.line, b.violation
                        );
                    }
                    None => {
                        if seen.as_deref() != Some(commit) {
                            update_ref(&root, &seen_name, commit, seen.as_deref())
                                .map_err(|e| Refusal::io(format!("ledger hosts: {e}")))?;
                        }
                        row.state = "ok".into();
                        row.message = format!("host {host}'s ledger verifies");
                    }
                }
            }
        }
        out.hosts.push(row);
    }
    Ok(out)
}
