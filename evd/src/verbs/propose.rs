//! `propose`: the agent lane. decide's grammar, but always an unbound, agent-proposed,
//! agent-disposable record, blamed on the calling agent, and idempotent per source_ref.

use proto::rpc::{
    DecideRequest, DraftGround, ProposeRequest, ProposeResult, ProposedEnvelope, Refusal,
};
use proto::vocab::{AGENT_DISPOSABLE, AGENT_PROPOSED};
use proto::Tick;

use super::common::tick_value;
use super::decide;
use super::write_path::{self, NewTick};
use crate::open::OpenStore;

/// The refusal for a check, an authority or a sha on the agent lane, naming the flag.
pub fn unbound_refusal(flag: &str) -> Refusal {
    Refusal::refused(
        "propose_unbound",
        format!(
            "evctl propose records an UNBOUND proposal — {flag} is not allowed here; a check + authority attach when a human runs `evctl ratify`"
        ),
    )
}

/// The first check-shaped field of a ground, as the flag that would have set it.
fn ground_flag(g: &DraftGround) -> Option<&'static str> {
    if g.test_ref.is_some() {
        Some("--assume-test")
    } else if g.counter_test.is_some() {
        Some("--counter-test")
    } else if !g.platforms.is_empty() {
        Some("--on-platform")
    } else if !g.triggered_by.is_empty() {
        Some("--triggered-by")
    } else if !g.surfaces.is_empty() {
        Some("--surface")
    } else if g.revisit.is_some() {
        Some("--revisit")
    } else {
        None
    }
}

fn envelope(t: &Tick) -> ProposedEnvelope {
    ProposedEnvelope {
        authority: t.authority.clone().unwrap_or_default(),
        blame: t.blame.clone(),
        decision: t.decision.clone(),
        id: t.id.clone(),
        kind: "ev-proposed".into(),
        provenance: t.provenance.clone().unwrap_or_default(),
    }
}

pub fn propose(store: &mut OpenStore, req: &ProposeRequest) -> Result<ProposeResult, Refusal> {
    if let Some(flag) = req.grounds.iter().find_map(ground_flag) {
        return Err(unbound_refusal(flag));
    }
    if req.authority.is_some() {
        return Err(unbound_refusal("--authority"));
    }
    if req.verified_at_sha.is_some() {
        return Err(unbound_refusal("--verified-at-sha"));
    }
    // Agent blame, never git identity: explicit, else the caller's agent id, else `agent`.
    let blame = req
        .blame
        .clone()
        .or_else(|| req.context.agent_id.clone().filter(|a| !a.is_empty()))
        .unwrap_or_else(|| "agent".to_string());
    let as_decide = DecideRequest {
        context: req.context.clone(),
        decision: req.decision.clone(),
        from_git: req.from_git.clone(),
        observe: req.observe.clone(),
        blame: Some(blame),
        verified_at_sha: None,
        authority: None,
        jurisdiction: req.jurisdiction.clone(),
        source_ref: req.source_ref.clone(),
        grounds: req.grounds.clone(),
        dry_run: false,
    };
    let draft = decide::build(&as_decide)?;

    // Idempotency: any live agent proposal on disk with the same source_ref (the collapse does
    // not apply, so an already ratified proposal still counts). The actor serializes this scan
    // with the write below, so concurrent proposes record exactly one tick.
    if let Some(key) = &draft.source_ref {
        if store.exists()? {
            if let Ok(ticks) = store.ticks() {
                let existing = ticks.into_iter().find(|(_, t)| {
                    t.status() == "live"
                        && t.is_agent_proposed()
                        && t.source_ref_key().as_deref() == Some(key.as_str())
                });
                if let Some((file, t)) = existing {
                    let t = &t.tick();
                    return Ok(ProposeResult {
                        id: t.id.clone(),
                        ground_count: t.grounds.len(),
                        deduped: true,
                        envelope: envelope(t),
                        tick: tick_value(file, t),
                        warnings: Vec::new(),
                    });
                }
            }
        }
    }

    let new = NewTick {
        decision: draft.decision,
        observe: draft.observe,
        grounds: draft.grounds,
        blame: draft.blame,
        authority: Some(AGENT_DISPOSABLE.into()),
        jurisdiction: draft.jurisdiction,
        source_ref: draft.source_ref.map(proto::SourceRef::Text),
        provenance: Some(AGENT_PROPOSED.into()),
        supersedes: None,
        ratifies: None,
    };
    let (tick, warnings) = write_path::write(store, new, "propose", false)?;
    Ok(ProposeResult {
        id: tick.id.clone(),
        ground_count: tick.grounds.len(),
        deduped: false,
        envelope: envelope(&tick),
        tick: tick_value(&tick.id, &tick),
        warnings,
    })
}
