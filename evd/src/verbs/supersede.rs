//! `supersede <id>`: replace a prior ruling under the append-only law, with a child carrying
//! the `supersedes` edge. A re-tag copies the payload and fixes a standing tag; an overturn is
//! a fresh ruling with its own grounds. The superseded tick stays as history.

use proto::rpc::{codes, DecideRequest, Refusal, SupersedeMode, SupersedeRequest, SupersedeResult};
use proto::vocab;

use super::common::{lookup, tick_value, Lookup};
use super::decide::{self, human_blame};
use super::write_path::{self, NewTick};
use crate::open::OpenStore;

fn refuse(reason: &str, msg: impl Into<String>) -> Refusal {
    Refusal::refused(reason, msg)
}

pub fn supersede(
    store: &mut OpenStore,
    req: &SupersedeRequest,
) -> Result<SupersedeResult, Refusal> {
    match req.mode {
        SupersedeMode::Retag => retag(store, req),
        SupersedeMode::Overturn => overturn(store, req),
    }
}

fn retag(store: &mut OpenStore, req: &SupersedeRequest) -> Result<SupersedeResult, Refusal> {
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
    let tags = req.retag.clone().unwrap_or_default();
    if tags.authority.is_none() && tags.jurisdiction.is_none() && tags.provenance.is_none() {
        return Err(refuse(
            "retag_needs_tag",
            "evctl supersede (re-tag) needs at least one of --authority / --jurisdiction / --provenance — or pass a new ruling text to overturn",
        ));
    }
    if let Some(a) = &tags.authority {
        vocab::check_authority(a).map_err(|m| refuse("authority_vocab", m))?;
    }
    if let Some(j) = &tags.jurisdiction {
        vocab::check_jurisdiction(j).map_err(|m| refuse("jurisdiction_vocab", m))?;
    }
    if let Some(p) = &tags.provenance {
        vocab::check_provenance(p).map_err(|m| refuse("provenance_vocab", m))?;
    }
    let authority = tags.authority.or_else(|| target.authority.clone());
    let jurisdiction = tags.jurisdiction.or_else(|| target.jurisdiction.clone());
    let provenance = tags.provenance.or_else(|| target.provenance.clone());
    if authority == target.authority
        && jurisdiction == target.jurisdiction
        && provenance == target.provenance
    {
        return Err(refuse(
            "retag_noop",
            format!(
                "tick {} already carries those tags — nothing to re-tag",
                req.id
            ),
        ));
    }
    if vocab::is_detect_only(jurisdiction.as_deref()) && target.has_test_check() {
        return Err(refuse(
            "detect_only_test",
            format!(
                "cannot set jurisdiction {} on a decision that carries a test check (detect-only)",
                jurisdiction.as_deref().unwrap_or_default()
            ),
        ));
    }
    let blame = human_blame(req.blame.as_deref(), None, &req.context)?;
    let new = NewTick {
        decision: target.decision.clone(),
        observe: target.observe.clone(),
        grounds: target.grounds.clone(),
        blame,
        authority,
        jurisdiction,
        source_ref: target.source_ref.clone(),
        provenance,
        supersedes: Some(req.id.clone()),
        ratifies: None,
    };
    let (tick, warnings) = write_path::write(store, new, "supersede", false)?;
    Ok(SupersedeResult {
        mode: SupersedeMode::Retag,
        child_id: tick.id.clone(),
        superseded_id: req.id.clone(),
        ground_count: None,
        tick: tick_value(&tick.id, &tick),
        warnings,
    })
}

fn overturn(store: &mut OpenStore, req: &SupersedeRequest) -> Result<SupersedeResult, Refusal> {
    match lookup(store, &req.id)? {
        Lookup::Missing => {
            return Err(Refusal::new(
                codes::NOT_FOUND,
                "not_found",
                format!("no such tick to supersede: {}", req.id),
            ))
        }
        Lookup::Broken(e) => return Err(Refusal::io(format!("reading {}: {e}", req.id))),
        Lookup::Found(_) => {}
    }
    let o = req.overturn.clone().unwrap_or_default();
    let as_decide = DecideRequest {
        context: req.context.clone(),
        decision: Some(o.decision),
        from_git: o.from_git,
        observe: o.observe,
        blame: req.blame.clone(),
        verified_at_sha: o.verified_at_sha,
        authority: o.authority,
        jurisdiction: o.jurisdiction,
        source_ref: o.source_ref,
        grounds: o.grounds,
        dry_run: false,
    };
    let draft = decide::build(&as_decide)?;
    if !draft.grounds.iter().any(|g| g.supports == "chosen") {
        return Err(refuse(
            "overturn_needs_assume",
            "evctl supersede <id> <new ruling> needs at least one --assume <why the prior ruling no longer holds>",
        ));
    }
    let new = NewTick {
        decision: draft.decision,
        observe: draft.observe,
        grounds: draft.grounds,
        blame: draft.blame,
        authority: draft.authority,
        jurisdiction: draft.jurisdiction,
        source_ref: draft.source_ref.map(proto::SourceRef::Text),
        provenance: None,
        supersedes: Some(req.id.clone()),
        ratifies: None,
    };
    let (tick, warnings) = write_path::write(store, new, "supersede", false)?;
    Ok(SupersedeResult {
        mode: SupersedeMode::Overturn,
        child_id: tick.id.clone(),
        superseded_id: req.id.clone(),
        ground_count: Some(tick.grounds.len()),
        tick: tick_value(&tick.id, &tick),
        warnings,
    })
}
