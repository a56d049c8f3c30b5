//! `log`: the chain from HEAD back to genesis, then every other tip (a merge of branches that
//! both decided, or writers that forked the chain) back to where it joins.

use proto::rpc::{LogEntry, LogFork, LogResult, Refusal};

use crate::open::OpenStore;
use crate::store::Entry;

/// `log`: walk `parent_id` from HEAD. A missing tick ends the walk (broken lineage); an
/// unreadable one is reported after the rows read so far.
pub fn log(store: &mut OpenStore) -> Result<LogResult, Refusal> {
    store.require()?;
    let mut cur = store.head()?;
    let mut out = LogResult {
        entries: Vec::new(),
        broken_at: None,
        unreadable: None,
        forks: Vec::new(),
    };
    let mut children = crate::verbs::common::superseding_children(store);
    let mut seen = std::collections::HashSet::new();
    while !cur.is_empty() && seen.insert(cur.clone()) {
        let entry = if proto::vocab::is_tick_id(&cur) {
            store.entry(&cur)?
        } else {
            None
        };
        match entry {
            None => {
                out.broken_at = Some(cur);
                break;
            }
            Some(Entry::Invalid(e)) | Some(Entry::NotJson(e)) | Some(Entry::Unreadable(e)) => {
                out.unreadable = Some((cur, *e));
                break;
            }
            Some(Entry::Tick(t)) => {
                out.entries.push(log_entry(&t, &mut children));
                cur = t.parent_id().to_string();
            }
        }
    }
    // Only from a whole chain: a broken one would make every tick beyond the break look like
    // a fork.
    if out.broken_at.is_none() && out.unreadable.is_none() {
        out.forks = forks(store, seen, &mut children)?;
    }
    Ok(out)
}

/// The tips off HEAD's chain (`on_chain`: its ids), newest first, each walked back until it
/// joins a chain already shown. A merge of two branches that both decided leaves one; so do two
/// writers that forked the chain.
fn forks(
    store: &mut OpenStore,
    mut on_chain: std::collections::HashSet<String>,
    children: &mut std::collections::HashMap<String, String>,
) -> Result<Vec<LogFork>, Refusal> {
    // A store holding a file that is no tick still logs its chain; forks are shown only where
    // every file reads.
    let Ok(ticks) = store.ticks() else {
        return Ok(Vec::new());
    };
    // By file name, as the walk from HEAD goes (a tick's own id field may say otherwise).
    let parents: std::collections::HashSet<&str> =
        ticks.iter().map(|(_, t)| t.parent_id()).collect();
    let by_file: std::collections::HashMap<&str, &crate::engine::packed::PackedTick> =
        ticks.iter().map(|(f, t)| (*f, *t)).collect();
    let mut tips: Vec<(&str, &crate::engine::packed::PackedTick)> = ticks
        .iter()
        .map(|(f, t)| (*f, *t))
        .filter(|(f, _)| !parents.contains(f) && !on_chain.contains(*f))
        .collect();
    tips.sort_by(|(fa, a), (fb, b)| (b.held_since(), *fb).cmp(&(a.held_since(), *fa)));
    let mut out = Vec::new();
    for (file, tip) in tips {
        let mut fork = LogFork {
            tip: file.to_string(),
            joins: None,
            entries: Vec::new(),
        };
        let mut cur = Some((file, tip));
        while let Some((f, t)) = cur {
            if !on_chain.insert(f.to_string()) {
                fork.joins = Some(f.to_string());
                break;
            }
            fork.entries.push(log_entry(t, children));
            cur = by_file.get_key_value(t.parent_id()).map(|(f, t)| (*f, *t));
        }
        out.push(fork);
    }
    Ok(out)
}

/// The row of tick `t`, marked with its newest superseding child (taken from `children`).
fn log_entry(
    t: &crate::engine::packed::PackedTick,
    children: &mut std::collections::HashMap<String, String>,
) -> LogEntry {
    LogEntry {
        id: t.id().to_string(),
        status: t.status().to_string(),
        decision: t.decision().to_string(),
        blame: t.blame().to_string(),
        provenance: t.provenance().map(str::to_string),
        supersedes: t.supersedes().map(str::to_string),
        ratifies: t.ratifies().map(str::to_string),
        superseded_by: children.remove(t.id()),
    }
}
