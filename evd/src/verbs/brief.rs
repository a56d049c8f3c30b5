//! `brief [--limit N]`: the user-ruled decisions an agent should read first, load-bearing ones
//! (those with a rejected road) at the top, as the frozen `ev-brief` contract.

use proto::rpc::{BriefDecision, BriefRequest, BriefResult, BriefRoad, Refusal};
use serde_json::{Map, Value};

use crate::open::OpenStore;

pub fn brief(store: &mut OpenStore, req: &BriefRequest) -> Result<BriefResult, Refusal> {
    store.require()?;
    let limit = req.limit.unwrap_or_else(|| store.config().brief_limit);
    let mut kept: Vec<(&str, &crate::engine::packed::PackedTick, bool)> = store
        .current()?
        .into_iter()
        .filter(|(_, t)| {
            t.status() == "live"
                && t.authority() == Some(proto::vocab::USER_RULED)
                && !t.is_agent_proposed()
        })
        .map(|(f, t)| (f, t, t.has_rejected_ground()))
        .collect();
    kept.sort_by(|a, b| {
        b.2.cmp(&a.2)
            .then_with(|| b.1.held_since().cmp(a.1.held_since()))
            .then_with(|| b.0.cmp(a.0))
    });
    let total = kept.len();
    let shown = match usize::try_from(limit) {
        Ok(0) => total,
        Ok(n) => n.min(total),
        Err(_) => total,
    };
    let elided_load_bearing = kept[shown..].iter().filter(|k| k.2).count();
    let advisory = kept.iter().filter(|k| !k.1.has_test_check()).count();
    let testbindable = kept[..shown]
        .iter()
        .filter(|k| k.1.has_test_check())
        .count();
    let decisions = kept[..shown]
        .iter()
        .map(|(_, p, lb)| {
            let t = p.tick();
            BriefDecision {
                bound: p.has_test_check(),
                rejected_roads: roads_not_taken(&t),
                source_ref: t.source_ref_key(),
                decision: t.decision,
                id: t.id,
                load_bearing: *lb,
            }
        })
        .collect();
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let out = BriefResult {
        advisory: count(advisory),
        decisions,
        elided: count(total - shown),
        elided_load_bearing: count(elided_load_bearing),
        kind: "ev-brief".into(),
        shown: count(shown),
        total: count(total),
    };
    let mut ev = Map::new();
    ev.insert("brief_bytes".into(), out.contract_line().len().into());
    ev.insert("decisions".into(), shown.into());
    ev.insert("elided".into(), (total - shown).into());
    ev.insert("op".into(), "brief".into());
    ev.insert("testbindable".into(), testbindable.into());
    ev.insert("total".into(), total.into());
    ev.insert("ts".into(), crate::engine::clock::now_rfc3339().into());
    store.append_event(&proto::json::compact(&Value::Object(ev)));
    Ok(out)
}

/// A tick's roads not taken, in ground order.
pub fn roads_not_taken(t: &proto::Tick) -> Vec<BriefRoad> {
    t.grounds
        .iter()
        .filter_map(|g| {
            g.rejected_option().map(|o| BriefRoad {
                claim: g.claim.clone(),
                option: o.to_string(),
            })
        })
        .collect()
}
