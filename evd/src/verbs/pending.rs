//! `pending [--source-ref <key>]`: the agent proposals awaiting a human, newest first.

use proto::rpc::{PendingRequest, PendingResult, Proposal, Refusal};

use crate::open::OpenStore;

pub fn pending(store: &mut OpenStore, req: &PendingRequest) -> Result<PendingResult, Refusal> {
    store.require()?;
    let proposals = store
        .current()?
        .into_iter()
        .filter(|(_, t)| t.status() == "live" && t.is_agent_proposed())
        .filter(|(_, t)| match &req.source_ref {
            Some(key) => t.source_ref_key().as_deref() == Some(key.as_str()),
            None => true,
        })
        .map(|(_, t)| Proposal {
            id: t.id().to_string(),
            status: t.status().to_string(),
            decision: t.decision().to_string(),
            blame: t.blame().to_string(),
            source_ref: t.source_ref_key(),
            held_since: t.held_since().to_string(),
        })
        .collect();
    Ok(PendingResult {
        filter: req.source_ref.clone(),
        proposals,
    })
}
