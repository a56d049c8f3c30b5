//! `ev.evidence`: every citation of the current decisions, re-hashed against its file (see
//! [`crate::ledger::evidence::marker_rows`]).

use proto::rpc::{CitedEvidence, EvidenceResult, Refusal};

use crate::open::OpenStore;

pub fn evidence(store: &mut OpenStore) -> Result<EvidenceResult, Refusal> {
    store.require()?;
    let mut out = EvidenceResult::default();
    for (row, sha256) in
        crate::ledger::evidence::marker_rows(&mut store.store, &mut store.evidence, false, true)?
    {
        out.holding += usize::from(row.label == "holds");
        out.citations.push(CitedEvidence {
            tick_id: row.tick_id,
            file: row.file,
            decision: row.decision,
            ground_index: row.ground_index,
            path: row.path,
            start: row.start,
            end: row.end,
            sha256,
            state: row.label,
            detail: row.detail,
        });
    }
    Ok(out)
}
