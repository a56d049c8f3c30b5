//! `ev.evidence`: every citation of the current decisions, re-hashed against its file.

use proto::rpc::{CitedEvidence, EvidenceResult, Refusal};

use crate::store::Store;

pub fn evidence(store: &mut Store) -> Result<EvidenceResult, Refusal> {
    store.require()?;
    let root = store.root().to_path_buf();
    let mut out = EvidenceResult::default();
    for (file, packed) in store.current()? {
        for (i, g) in packed.grounds().enumerate() {
            // A marker that is not a citation was refused when written; one in a tick written
            // by another tool is no evidence, and is answered as `malformed`.
            let cited = match proto::evidence::citations(g.claim) {
                Ok(c) => c,
                Err(e) => {
                    out.citations.push(CitedEvidence {
                        tick_id: packed.id().to_string(),
                        file: file.to_string(),
                        decision: packed.decision().to_string(),
                        ground_index: i,
                        path: String::new(),
                        start: 0,
                        end: 0,
                        sha256: String::new(),
                        state: "malformed".into(),
                        detail: e,
                    });
                    continue;
                }
            };
            for c in cited {
                let st = crate::evidence::state(&root, &c);
                out.holding += usize::from(st.holds());
                out.citations.push(CitedEvidence {
                    tick_id: packed.id().to_string(),
                    file: file.to_string(),
                    decision: packed.decision().to_string(),
                    ground_index: i,
                    path: c.path,
                    start: c.start,
                    end: c.end,
                    sha256: c.sha256,
                    state: st.label().to_string(),
                    detail: if st.holds() {
                        String::new()
                    } else {
                        st.describe()
                    },
                });
            }
        }
    }
    Ok(out)
}
