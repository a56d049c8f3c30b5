//! `ratify <proposal> --blame <human>`: a named human raises an agent proposal to a user-ruled,
//! human-now decision. The proposal stays on disk as history; the child names it (`ratifies`).

use proto::rpc::{codes, RatifyRequest, RatifyResult, Refusal};
use proto::vocab::USER_RULED;

use super::common::{lookup, tick_value, Lookup};
use super::write_path::{self, NewTick};
use crate::open::OpenStore;

pub fn ratify(store: &mut OpenStore, req: &RatifyRequest) -> Result<RatifyResult, Refusal> {
    store.require()?;
    let target = match lookup(store, &req.id)? {
        Lookup::Missing => {
            return Err(Refusal::new(
                codes::NOT_FOUND,
                "not_found",
                format!("no such tick: {}", req.id),
            ))
        }
        Lookup::Broken(e) => return Err(Refusal::io(format!("reading {}: {e}", req.id))),
        Lookup::Found(t) => t,
    };
    if !target.is_agent_proposed() {
        return Err(Refusal::refused(
            "not_a_proposal",
            format!(
                "evctl ratify only ratifies an agent proposal; tick {} is {} (nothing to ratify)",
                req.id,
                target.provenance_or_default()
            ),
        ));
    }
    let blame = req.blame.trim();
    if blame.is_empty() {
        return Err(Refusal::refused(
            "blame_empty",
            "evctl ratify requires a non-empty --blame <human> (never auto-filled)",
        ));
    }
    let new = NewTick {
        decision: target.decision.clone(),
        observe: target.observe.clone(),
        grounds: target.grounds.clone(),
        blame: blame.to_string(),
        authority: Some(USER_RULED.into()),
        jurisdiction: target.jurisdiction.clone(),
        source_ref: target.source_ref.clone(),
        provenance: None,
        supersedes: None,
        ratifies: Some(req.id.clone()),
    };
    let (tick, warnings) = write_path::write(store, new, "ratify", false)?;
    Ok(RatifyResult {
        proposal_id: req.id.clone(),
        child_id: tick.id.clone(),
        tick: tick_value(&tick.id, &tick),
        warnings,
    })
}
