//! `doctor [--fix]`: find what a hand-resolved or broken store holds, and with `fix` repair it:
//!
//! - stray entries in `ticks/` (a file that is no tick, a symlink, a directory, a FIFO): moved
//!   out to `results/doctor/<time>/`, never deleted; a tick under another name (`<id>.orig`) is
//!   renamed to its id when that file is missing;
//! - a tick file that does not read as the tick its name says, or one that is missing (named by
//!   HEAD or as a parent): put back from git (the index, else a commit that added it) when git
//!   holds a copy whose content hashes to that id; a bad one git cannot replace is moved out;
//! - HEAD with git's conflict markers: the sides' ids merged by the rule evctl's merge driver
//!   applies ([`proto::head::merged`]; without the base, the side that descends from the other,
//!   else the greater id); HEAD naming no tick, or empty above ticks: the newest tip.
//!
//! A tick whose parent git cannot give back is reported and left in place: repairing it would
//! lose a decision. Without `fix` it writes nothing and says what `--fix` would do. It must not
//! mint, rewrite or delete a tick.

use std::collections::{BTreeMap, BTreeSet};

use proto::rpc::{DoctorFinding, DoctorRequest, DoctorResult, Refusal};
use proto::Tick;

use crate::open::OpenStore;
use crate::store::repair::Step;
use crate::sys::fsio;

/// Whether `bytes` are a tick file whose content hashes to `id`.
fn tick_named(bytes: &[u8], id: &str) -> Option<Tick> {
    let text = std::str::from_utf8(bytes).ok()?;
    let t = Tick::parse(text).ok()?;
    (t.id == id && content_id(&t) == id).then_some(t)
}

fn content_id(t: &Tick) -> String {
    proto::id::tick_id(&t.decision, &t.observe, &t.grounds, &t.parent_id)
}

struct Plan {
    findings: Vec<DoctorFinding>,
    steps: Vec<Step>,
    /// The ticks `ticks/` holds once the steps are made, by id.
    ticks: BTreeMap<String, Tick>,
    /// HEAD's new text, when it changes.
    head: Option<String>,
    head_now: String,
}

/// A tick file's copy from git: its bytes, and the tick they hash to.
type GitCopy = (Vec<u8>, Tick);

impl Plan {
    /// Put `ticks/<id>` back from `copy`.
    fn put_back(&mut self, id: &str, (bytes, tick): GitCopy) {
        self.steps.push(Step::Restore {
            id: id.to_string(),
            bytes,
        });
        self.ticks.insert(id.to_string(), tick);
    }
}

fn finding(kind: &str, subject: String, problem: String, repair: Option<String>) -> DoctorFinding {
    DoctorFinding {
        kind: kind.into(),
        subject,
        problem,
        repair,
        repaired: false,
    }
}

/// `doctor`: the findings, and with `req.fix` the repairs made.
pub fn doctor(store: &mut OpenStore, req: &DoctorRequest) -> Result<DoctorResult, Refusal> {
    store.store.require_present()?;
    let mut plan = plan(store)?;
    let run = stamp();
    let mut moved_to = plan
        .steps
        .iter()
        .any(|s| matches!(s, Step::MoveOut(_)))
        .then(|| format!(".evolving/results/doctor/{run}"));
    if req.fix && (!plan.steps.is_empty() || plan.head.is_some()) {
        moved_to = store
            .store
            .repair(&plan.steps, &run, plan.head.as_deref())?;
        for f in &mut plan.findings {
            f.repaired = f.repair.is_some();
        }
    }
    Ok(DoctorResult {
        ticks: plan.ticks.len(),
        head: plan.head.clone().unwrap_or(plan.head_now),
        moved_to,
        fixed: req.fix,
        findings: plan.findings,
    })
}

/// A directory name for this run's moved-out files: the UTC time, to the second.
fn stamp() -> String {
    let now = crate::engine::clock::now();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

fn plan(store: &mut OpenStore) -> Result<Plan, Refusal> {
    let root = store.root().to_path_buf();
    let ticks_dir = store.store.ticks_dir();
    let mut p = Plan {
        findings: Vec::new(),
        steps: Vec::new(),
        ticks: BTreeMap::new(),
        head: None,
        head_now: String::new(),
    };
    let listing = match std::fs::symlink_metadata(&ticks_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        _ => Some(store.store.list_ticks_dir()?),
    };
    let from_git = |id: &str| {
        crate::git::history::recover(
            &root,
            &format!(".evolving/ticks/{id}"),
            crate::engine::limits::MAX_TICK_BYTES as u64,
            |b| tick_named(&b, id).map(|t| (b, t)),
        )
    };
    let mut misnamed: Vec<(String, Tick)> = Vec::new();
    if let Some(listing) = listing {
        for (name, kind) in listing.odd {
            p.findings.push(finding(
                "stray",
                format!(".evolving/ticks/{name}"),
                format!("{kind} in ticks/, where only tick files belong"),
                Some("moved out of ticks/".into()),
            ));
            p.steps.push(Step::MoveOut(name));
        }
        for (name, symlink) in listing.files {
            let subject = format!(".evolving/ticks/{name}");
            if symlink {
                p.findings.push(finding(
                    "stray",
                    subject,
                    "a symlink in ticks/ (a store never follows links)".into(),
                    Some("moved out of ticks/ (the link, not what it points to)".into()),
                ));
                p.steps.push(Step::MoveOut(name));
                continue;
            }
            let read = fsio::read_regular(&ticks_dir.join(&name));
            let parsed = match &read {
                Ok((_, text)) => Tick::parse(text).map_err(|e| e.to_string()),
                Err(e) => Err(format!("cannot be read: {e}")),
            };
            let is_id = proto::vocab::is_tick_id(&name);
            match parsed {
                Ok(t) if is_id && t.id == name && content_id(&t) == name => {
                    p.ticks.insert(name, t);
                }
                // A whole tick under another name (`<id>.orig`, or another tick's id).
                Ok(t) if t.id == content_id(&t) => misnamed.push((name, t)),
                other => {
                    let problem = match other {
                        Ok(t) => format!(
                            "its content hashes to {}, not to the id it records ({}): edited after it was written",
                            content_id(&t),
                            t.id
                        ),
                        Err(e) if is_id => format!("is not a tick: {e}"),
                        Err(_) => "not a tick file".into(),
                    };
                    let restored = if is_id { from_git(&name) } else { None };
                    match restored {
                        Some(copy) => {
                            p.findings.push(finding(
                                "bad-tick",
                                subject,
                                problem,
                                Some("moved out of ticks/, and the tick put back from git".into()),
                            ));
                            p.steps.push(Step::MoveOut(name.clone()));
                            p.put_back(&name, copy);
                        }
                        None => {
                            let kind = if is_id { "bad-tick" } else { "stray" };
                            let repair = if is_id {
                                "moved out of ticks/ (git holds no good copy of it)"
                            } else {
                                "moved out of ticks/"
                            };
                            p.findings
                                .push(finding(kind, subject, problem, Some(repair.into())));
                            p.steps.push(Step::MoveOut(name));
                        }
                    }
                }
            }
        }
    }
    // A tick under another name (`<id>.orig`, `<id>~`): its own name when that is free.
    misnamed.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, t) in misnamed {
        let id = t.id.clone();
        let subject = format!(".evolving/ticks/{name}");
        if p.ticks.contains_key(&id) {
            p.findings.push(finding(
                "stray",
                subject,
                format!("a copy of tick {id}, which ticks/ already holds"),
                Some("moved out of ticks/".into()),
            ));
            p.steps.push(Step::MoveOut(name));
        } else {
            p.findings.push(finding(
                "misnamed-tick",
                subject,
                format!("tick {id} under another name, where no tick reads it"),
                Some(format!("renamed to ticks/{id}")),
            ));
            p.steps.push(Step::Rename {
                from: name,
                to: id.clone(),
            });
            p.ticks.insert(id, t);
        }
    }
    // Missing parents, put back from git where it has them (their own parents too).
    let mut asked: BTreeSet<String> = BTreeSet::new();
    loop {
        let missing: Vec<(String, String)> = p
            .ticks
            .iter()
            .filter(|(_, t)| !t.parent_id.is_empty() && !p.ticks.contains_key(&t.parent_id))
            .filter(|(_, t)| !asked.contains(&t.parent_id))
            .map(|(id, t)| (id.clone(), t.parent_id.clone()))
            .collect();
        if missing.is_empty() {
            break;
        }
        for (child, parent) in missing {
            if !asked.insert(parent.clone()) {
                continue;
            }
            let subject = format!(".evolving/ticks/{child}");
            match from_git(&parent) {
                Some(copy) => {
                    p.findings.push(finding(
                        "missing-parent",
                        subject,
                        format!("its parent {parent} is missing from ticks/"),
                        Some(format!("ticks/{parent} put back from git")),
                    ));
                    p.put_back(&parent, copy);
                }
                None => p.findings.push(finding(
                    "missing-parent",
                    subject,
                    format!(
                        "its parent {parent} is missing from ticks/, and git holds no copy of it"
                    ),
                    None,
                )),
            }
        }
    }
    head(store, &mut p, &from_git)?;
    Ok(p)
}

/// HEAD's findings and its new text.
fn head(
    store: &mut OpenStore,
    p: &mut Plan,
    from_git: &dyn Fn(&str) -> Option<GitCopy>,
) -> Result<(), Refusal> {
    let raw = store.store.head_raw()?;
    let now = raw.trim().to_string();
    p.head_now = now.clone();
    // A tick HEAD (or a side of its conflict) names that git can give back.
    let put_back = |p: &mut Plan, id: &str| -> bool {
        if p.ticks.contains_key(id) {
            return true;
        }
        from_git(id).map(|copy| p.put_back(id, copy)).is_some()
    };
    let (kind, problem, to) = if let Some(c) = proto::head::conflict(&raw) {
        let ours = proto::head::Conflict::one(&c.ours).filter(|id| put_back(p, id));
        let theirs = proto::head::Conflict::one(&c.theirs).filter(|id| put_back(p, id));
        let base = c.base.as_deref().and_then(proto::head::Conflict::one);
        let (to, why) = match (ours, theirs) {
            (Some(o), Some(t)) if base.is_some() => (
                proto::head::merged(base, o, t).to_string(),
                "as evctl's merge driver merges HEAD",
            ),
            (Some(o), Some(t)) if descends(&p.ticks, t, o) => {
                (t.to_string(), "the side that descends from the other")
            }
            (Some(o), Some(t)) if descends(&p.ticks, o, t) => {
                (o.to_string(), "the side that descends from the other")
            }
            (Some(o), Some(t)) => (
                o.max(t).to_string(),
                "both sides decided: the greater id, as evctl's merge driver does; the other stays a live fork",
            ),
            (Some(one), None) | (None, Some(one)) => {
                (one.to_string(), "the only side naming a tick")
            }
            (None, None) => (newest_tip(&p.ticks), "the newest tip"),
        };
        (
            "conflicted-head",
            format!(
                "holds git's conflict markers (ours: {}, theirs: {})",
                shown(&c.ours),
                shown(&c.theirs)
            ),
            Some((to, why)),
        )
    } else if now.is_empty() {
        if p.ticks.is_empty() {
            ("", String::new(), None)
        } else {
            (
                "bad-head",
                format!("is empty, but ticks/ holds {} ticks", p.ticks.len()),
                Some((newest_tip(&p.ticks), "the newest tip")),
            )
        }
    } else if !proto::vocab::is_tick_id(&now) {
        let mut text: String = now.chars().take(40).collect();
        if text.len() < now.len() {
            text.push('…');
        }
        (
            "bad-head",
            format!("holds {text:?}, which is not a tick id"),
            Some((newest_tip(&p.ticks), "the newest tip")),
        )
    } else if p.ticks.contains_key(&now) {
        ("", String::new(), None)
    } else if put_back(p, &now) {
        (
            "missing-head-tick",
            format!("names {now}, but there is no ticks/{now}"),
            Some((now.clone(), "the tick put back from git")),
        )
    } else {
        (
            "missing-head-tick",
            format!("names {now}, but there is no ticks/{now} and git holds no copy of it"),
            Some((newest_tip(&p.ticks), "the newest tip")),
        )
    };
    if let Some((to, why)) = to {
        let repair = if to == now {
            format!("ticks/{now} put back from git")
        } else if to.is_empty() {
            "emptied (ticks/ holds no tick)".to_string()
        } else {
            format!("set to {to} ({why})")
        };
        p.findings
            .push(finding(kind, "HEAD".into(), problem, Some(repair)));
        if to != now || raw != now {
            p.head = Some(to);
        }
    }
    Ok(())
}

fn shown(side: &[String]) -> String {
    match side {
        [] => "empty".into(),
        [one] => one.clone(),
        many => format!("{} lines", many.len()),
    }
}

/// Whether `a` descends from `b` (walking parents from `a`).
fn descends(ticks: &BTreeMap<String, Tick>, a: &str, b: &str) -> bool {
    let mut cur = a;
    let mut steps = 0;
    while let Some(t) = ticks.get(cur) {
        if t.parent_id == b {
            return true;
        }
        steps += 1;
        if steps > ticks.len() {
            return false;
        }
        cur = &t.parent_id;
    }
    false
}

/// The tip (a tick no other names as parent) decided last, ties to the greater id; empty when
/// there is no tick.
fn newest_tip(ticks: &BTreeMap<String, Tick>) -> String {
    let parents: BTreeSet<&str> = ticks.values().map(|t| t.parent_id.as_str()).collect();
    ticks
        .iter()
        .filter(|(id, _)| !parents.contains(id.as_str()))
        .max_by(|(ia, a), (ib, b)| (&a.held_since, ia).cmp(&(&b.held_since, ib)))
        .map(|(id, _)| id.clone())
        .unwrap_or_default()
}
