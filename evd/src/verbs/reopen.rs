//! `reopen <id>`: one tick, read directly, with what each test ground reads now. The verdicts
//! come from the pure engine with reopen's own inputs: the cached `results/origin-sha` as the
//! staleness reference (never git), no attest set, no memo locks.

use proto::model::Check;
use proto::rpc::{codes, Refusal, ReopenGround, ReopenResult};
use proto::Tick;

use crate::engine::verdict::{self, Inputs};
use crate::git::ranges::{touched_since_verified, triggered_since};
use crate::open::OpenStore;
use crate::store::results::{cached_origin, read_receipts, read_selected};
use crate::verbs::common::{lookup, Lookup};

/// What git says about one ground, asked upstream's way (one process per question).
struct AskGit<'a> {
    root: &'a std::path::Path,
    verified: &'a str,
    reference: Option<&'a str>,
    paths: &'a [String],
}

impl verdict::GitSays for AskGit<'_> {
    fn touched_since_verified(&mut self) -> bool {
        self.reference
            .is_none_or(|r| touched_since_verified(self.root, self.verified, r, self.paths))
    }

    fn uncommitted(&mut self) -> bool {
        crate::git::worktree::status_of(self.root, self.paths)
    }
}

pub fn reopen(store: &mut OpenStore, id: &str) -> Result<ReopenResult, Refusal> {
    let tick = match lookup(store, id)? {
        Lookup::Missing => {
            return Err(Refusal::new(
                codes::NOT_FOUND,
                "not_found",
                format!("no tick with id {id}"),
            ))
        }
        Lookup::Broken(e) => return Err(Refusal::io(format!("reading {id}: {e}"))),
        Lookup::Found(t) => t,
    };
    let superseded_by = crate::verbs::common::superseding_children(store).remove(id);
    let results = store.results_dir();
    let origin = cached_origin(&results);
    let selected = read_selected(&results);
    let inputs = Inputs {
        reference_sha: origin.as_deref(),
        attest: None,
        selected: selected.as_ref(),
        now: crate::engine::clock::now(),
        staleness_days: store.config().staleness_days,
    };
    let grounds = tick
        .grounds
        .iter()
        .map(|g| {
            let mut row = ReopenGround {
                supports: g.supports.clone(),
                claim: g.claim.clone(),
                check: "none".into(),
                reference: None,
                verified_at_sha: None,
                verdict: None,
            };
            match &g.check {
                Some(Check::Person { reference }) => {
                    row.check = "person".into();
                    row.reference = Some(reference.clone());
                }
                Some(
                    c @ Check::Test {
                        reference,
                        verified_at_sha,
                        liveness,
                        ..
                    },
                ) => {
                    let rs = read_receipts(&results, reference);
                    let triggered = verdict::latest(&rs).is_some_and(|last| {
                        triggered_since(store.root(), &last.commit, &liveness.triggered_by)
                    });
                    let mut git = AskGit {
                        root: store.root(),
                        verified: verified_at_sha,
                        reference: origin.as_deref(),
                        paths: &liveness.triggered_by,
                    };
                    let v = verdict::evaluate_with_git(Some(c), &rs, triggered, &inputs, &mut git);
                    row.check = "test".into();
                    row.reference = Some(reference.clone());
                    row.verified_at_sha = Some(verified_at_sha.clone());
                    row.verdict = Some(v.label.as_str().to_string());
                }
                None => {}
            }
            row
        })
        .collect();
    store.append_event(&crate::engine::events::tick_event(
        "reopen",
        &tick,
        crate::engine::clock::now(),
    ));
    Ok(result(&tick, superseded_by, grounds))
}

fn result(t: &Tick, superseded_by: Option<String>, grounds: Vec<ReopenGround>) -> ReopenResult {
    ReopenResult {
        id: t.id.clone(),
        decision: t.decision.clone(),
        observe: t.observe.clone(),
        agent_proposed: t.is_agent_proposed(),
        authority: t.authority.clone(),
        jurisdiction: t.jurisdiction.clone(),
        source_ref: t.source_ref_key(),
        supersedes: t.supersedes.clone(),
        ratifies: t.ratifies.clone(),
        superseded_by,
        grounds,
    }
}
