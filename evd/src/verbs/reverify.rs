//! `reverify [<id>…]`: a decision whose guarded paths changed in a commit reads stale until it
//! is verified again at a newer commit. When every bound test of it has a green, falsifiable run
//! at HEAD on each platform it names (its counter-test failing there), record that as a child
//! tick: the same decision, observe and grounds, each test ground's `verified_at_sha` set to
//! HEAD, `supersedes` the old one. Upstream `ev` reads the child as any supersede and agrees it
//! is green.
//!
//! It owns the rule for what may be re-verified and the child it writes. It must not run a test
//! (the caller runs them and records receipts first: `evctl reverify` does), nor judge a verdict
//! otherwise than the check's own evaluation does.

use std::collections::BTreeSet;

use proto::model::{is_40_lower_hex, Check, Ground, Tick};
use proto::rpc::{
    codes, CheckRequest, MissingRun, Refusal, ReverifyOutcome, ReverifyRequest, ReverifyResult,
    ReverifyStatus,
};

use super::common::{lookup, Lookup};
use super::write_path::{self, NewTick};
use crate::engine::receipts::RunResult;
use crate::open::OpenStore;

/// The row label a ground has when a commit since its `verified_at_sha` touched what it guards.
const STALE_BY_COMMIT: &str = "stale:sha";

pub fn reverify(store: &mut OpenStore, req: &ReverifyRequest) -> Result<ReverifyResult, Refusal> {
    store.require()?;
    let head = req
        .context
        .git
        .head
        .clone()
        .filter(|h| is_40_lower_hex(h))
        .ok_or_else(|| {
            Refusal::refused(
                "no_head",
                "reverify needs a git repository with a commit at HEAD: it records that the decisions hold at that commit",
            )
        })?;
    // The verdicts as `check` reads them now, on the caller's basis.
    let check = CheckRequest {
        context: req.context.clone(),
        ..Default::default()
    };
    let e = crate::verbs::check::evaluated(store, &check)?;
    let uncommitted = e.basis.uncommitted.clone();
    // Without ids: every current decision a commit since its verification made stale.
    let ids: Vec<String> = if req.ids.is_empty() {
        let stale: BTreeSet<&str> = e
            .eval
            .parts
            .iter()
            .filter(|p| {
                p.tests
                    .as_ref()
                    .is_some_and(|t| t.rows.iter().any(|r| &*r.event_label == STALE_BY_COMMIT))
            })
            .map(|p| p.tick.id())
            .collect();
        stale.into_iter().map(str::to_string).collect()
    } else {
        let mut seen = BTreeSet::new();
        req.ids
            .iter()
            .filter(|id| seen.insert(id.to_string()))
            .cloned()
            .collect()
    };
    // Which of them are current decisions (one pass, nothing copied). A part's file name is
    // its tick's id but for a tick kept under another name: the names are compared first (one
    // pointer less to follow per part: at 10k parts the ids alone cost milliseconds of memory
    // reads), the ids only where a name is not an id.
    let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
    let live: std::collections::HashSet<String> = e
        .eval
        .parts
        .iter()
        .filter(|p| wanted.contains(&*p.file) || !proto::vocab::is_tick_id(&p.file))
        .map(|p| p.tick.id())
        .filter(|id| wanted.contains(id))
        .map(str::to_string)
        .collect();
    let mut result = ReverifyResult {
        head: head.clone(),
        outcomes: Vec::new(),
        warnings: Vec::new(),
    };
    for id in ids {
        let tick = match lookup(store, &id)? {
            Lookup::Found(t) => t,
            Lookup::Missing => {
                return Err(Refusal::new(
                    codes::NOT_FOUND,
                    "not_found",
                    format!("no such tick: {id}"),
                ))
            }
            Lookup::Broken(e) => return Err(Refusal::io(format!("reading {id}: {e}"))),
        };
        let mut outcome = ReverifyOutcome {
            id: id.clone(),
            decision: tick.decision.clone(),
            status: ReverifyStatus::Refused,
            child_id: None,
            reason: None,
            missing: Vec::new(),
        };
        match judge(
            store,
            &tick,
            &head,
            live.contains(&id),
            uncommitted.as_deref(),
        ) {
            Judged::Refused(why) => outcome.reason = Some(why),
            Judged::Current => outcome.status = ReverifyStatus::Current,
            Judged::Missing(missing) => {
                outcome.status = ReverifyStatus::NeedsRun;
                outcome.reason = Some(format!(
                    "no run at HEAD for {}",
                    missing
                        .iter()
                        .map(|m| format!("{} on {}", proto::json::q(&m.selector), m.platform))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                outcome.missing = missing;
            }
            Judged::Holds => {
                outcome.status = ReverifyStatus::Reverified;
                if !req.dry_run {
                    let (child, warnings) =
                        write_path::write(store, child_of(&tick, &id, &head), "supersede", false)?;
                    outcome.child_id = Some(child.id);
                    result.warnings.extend(warnings);
                }
            }
        }
        result.outcomes.push(outcome);
    }
    Ok(result)
}

/// One test ground of a decision, as a re-verification reads it.
struct Bound<'t> {
    selector: &'t str,
    counter: Option<&'t str>,
    platforms: &'t [String],
    triggers: &'t [String],
    verified_at: &'t str,
}

/// What one decision's re-verification comes to.
enum Judged {
    Refused(String),
    Current,
    Missing(Vec<MissingRun>),
    Holds,
}

fn judge(
    store: &mut OpenStore,
    tick: &Tick,
    head: &str,
    live: bool,
    uncommitted: Option<&crate::git::worktree::Uncommitted>,
) -> Judged {
    if !live {
        return Judged::Refused(
            "not a current decision (superseded, or not live): re-verify the one that replaced it"
                .into(),
        );
    }
    let tests: Vec<Bound<'_>> = tick
        .grounds
        .iter()
        .filter_map(|g| match &g.check {
            Some(Check::Test {
                reference,
                counter_test,
                liveness,
                verified_at_sha,
            }) => Some(Bound {
                selector: reference,
                counter: counter_test.as_deref(),
                platforms: &liveness.platforms,
                triggers: &liveness.triggered_by,
                verified_at: verified_at_sha,
            }),
            _ => None,
        })
        .collect();
    if tests.is_empty() {
        return Judged::Refused("it has no test-bound ground to re-verify".into());
    }
    if tests.iter().all(|t| t.verified_at == head) {
        return Judged::Current;
    }
    let touched: Vec<&str> = uncommitted
        .map(|u| {
            u.paths
                .iter()
                .filter(|p| {
                    tests.iter().any(|t| {
                        t.triggers
                            .iter()
                            .any(|trigger| proto::pathspec::covers(trigger, p))
                    })
                })
                .map(String::as_str)
                .collect()
        })
        .unwrap_or_default();
    if !touched.is_empty() {
        // Its tests would run against those changes, not HEAD. Committing them first is one
        // way (the gate blocks that while the decision is stale); the other is named whole.
        return Judged::Refused(format!(
            "guarded paths have uncommitted changes ({}): its tests would run against them, not HEAD; set them aside while re-verifying: `{}`",
            touched.join(", "),
            proto::shell::reverify_set_aside(&tick.id, &touched)
        ));
    }
    let mut missing = Vec::new();
    for t in &tests {
        let (selector, counter) = (t.selector, t.counter);
        let key = proto::id::receipt_key(selector);
        let receipts = store.receipts.get_keyed(&key, selector);
        for p in t.platforms {
            let at_head = crate::engine::verdict::latest(
                receipts
                    .iter()
                    .filter(|r| r.test == *selector && &r.platform == p && r.commit == head),
            );
            match at_head {
                None => missing.push(MissingRun {
                    selector: selector.to_string(),
                    platform: p.clone(),
                }),
                Some(r) if r.result != RunResult::Green => {
                    return Judged::Refused(format!(
                        "test {} is {} at HEAD on {p}",
                        proto::json::q(selector),
                        r.result.as_str()
                    ))
                }
                Some(r) if r.falsifiable == Some(false) => {
                    return Judged::Refused(format!(
                        "counter-test {} passes at HEAD on {p}, so the test proves nothing there",
                        proto::json::q(counter.unwrap_or_default())
                    ))
                }
                Some(_) => {}
            }
        }
    }
    if missing.is_empty() {
        Judged::Holds
    } else {
        Judged::Missing(missing)
    }
}

/// The re-verification of `tick` (file `id`) at `head`: the same payload and tags, every test
/// ground verified at `head`, superseding it.
fn child_of(tick: &Tick, id: &str, head: &str) -> NewTick {
    let grounds: Vec<Ground> = tick
        .grounds
        .iter()
        .map(|g| {
            let mut g = g.clone();
            if let Some(Check::Test {
                verified_at_sha, ..
            }) = &mut g.check
            {
                *verified_at_sha = head.to_string();
            }
            g
        })
        .collect();
    NewTick {
        decision: tick.decision.clone(),
        observe: tick.observe.clone(),
        grounds,
        blame: tick.blame.clone(),
        authority: tick.authority.clone(),
        jurisdiction: tick.jurisdiction.clone(),
        source_ref: tick.source_ref.clone(),
        provenance: tick.provenance.clone(),
        supersedes: Some(id.to_string()),
        ratifies: None,
    }
}
