//! `why <selector>`: every live tick (not only the current view) with a test ground bound to
//! exactly this selector.

use proto::model::Check;
use proto::rpc::{Refusal, WhyMatch, WhyRequest, WhyResult};

use crate::open::OpenStore;

pub fn why(store: &mut OpenStore, req: &WhyRequest) -> Result<WhyResult, Refusal> {
    store.require()?;
    // `ticks()` comes sorted by file name; grounds keep their stored order.
    let matches = store
        .ticks()?
        .into_iter()
        .filter(|(_, t)| {
            t.status() == "live" && t.test_bindings().any(|(_, r, _)| r == req.selector)
        })
        // Only the ticks bound to this selector are rebuilt whole.
        .flat_map(|(file, p)| {
            let t = p.tick();
            t.grounds
                .iter()
                .filter_map(|g| match &g.check {
                    Some(Check::Test { reference, .. }) if *reference == req.selector => {
                        Some(WhyMatch {
                            file: file.to_string(),
                            decision: t.decision.clone(),
                            claim: g.claim.clone(),
                            supports: g.supports.clone(),
                        })
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    Ok(WhyResult {
        selector: req.selector.clone(),
        matches,
    })
}
