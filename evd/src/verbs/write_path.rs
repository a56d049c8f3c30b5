//! The single write path every tick-writing verb funnels into (commands.md §0.5): the
//! detect-only lock, the R3 warnings, the no-store refusal, then parent = HEAD, the clock, the id,
//! and (unless previewing) the durable append and its event.

use proto::rpc::{Refusal, Warning};
use proto::{Ground, SourceRef, Tick};

use crate::open::OpenStore;

/// A tick about to be written: everything but parent, time and id.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTick {
    pub decision: String,
    pub observe: String,
    pub grounds: Vec<Ground>,
    pub blame: String,
    pub authority: Option<String>,
    pub jurisdiction: Option<String>,
    pub source_ref: Option<SourceRef>,
    pub provenance: Option<String>,
    pub supersedes: Option<String>,
    pub ratifies: Option<String>,
}

/// Steps 1 and 2: the detect-only lock, then one R3 warning per (text, word).
pub fn checks(
    decision: &str,
    observe: &str,
    grounds: &[Ground],
    jurisdiction: Option<&str>,
) -> Result<Vec<Warning>, Refusal> {
    if proto::vocab::is_detect_only(jurisdiction) && proto::model::has_test_check(grounds) {
        return Err(Refusal::refused(
            "detect_only_test",
            "a detect-only (C/D) jurisdiction cannot carry a runnable test check — a detect-only decision never gates, so it holds no test binding",
        ));
    }
    let texts = [decision, observe]
        .into_iter()
        .chain(grounds.iter().map(|g| g.claim.as_str()));
    Ok(texts
        .flat_map(crate::engine::lint::r3_hits)
        .map(|w| Warning {
            kind: "r3_lint".into(),
            message: crate::engine::lint::r3_warning(w),
        })
        .collect())
}

/// Step 4: the tick `new` becomes on `parent_id` at `now` (status `live`, id = content hash).
pub fn mint(new: NewTick, parent_id: String, now: time::OffsetDateTime) -> Tick {
    let id = proto::id::tick_id(&new.decision, &new.observe, &new.grounds, &parent_id);
    Tick {
        decision: new.decision,
        observe: new.observe,
        grounds: new.grounds,
        parent_id,
        id,
        status: "live".into(),
        held_since: crate::engine::clock::format(now),
        blame: new.blame,
        authority: new.authority,
        jurisdiction: new.jurisdiction,
        source_ref: new.source_ref,
        provenance: new.provenance,
        supersedes: new.supersedes,
        ratifies: new.ratifies,
        unknown_keys: Vec::new(),
    }
}

/// Run the whole path for `new`. With `preview`, nothing is written (no tick, HEAD or event);
/// the returned tick is the one a real write would mint if HEAD does not move meanwhile.
/// `op` names the event appended on a real write. Refusals carry the warnings emitted before
/// them.
pub fn write(
    store: &mut OpenStore,
    new: NewTick,
    op: &str,
    preview: bool,
) -> Result<(Tick, Vec<Warning>), Refusal> {
    let warnings = checks(
        &new.decision,
        &new.observe,
        &new.grounds,
        new.jurisdiction.as_deref(),
    )?;
    let with = |r: Refusal| r.with_warnings(warnings.clone());
    store.require().map_err(with)?;
    let parent_id = store.head_for_write().map_err(with)?;
    let now = crate::engine::clock::now();
    let tick = mint(new, parent_id, now);
    if preview {
        // Refused exactly as the append would refuse the write.
        crate::engine::limits::check_tick(&tick).map_err(with)?;
        crate::ledger::evidence::check_tick(store.root(), &tick).map_err(with)?;
    } else {
        let event = crate::engine::events::tick_event(op, &tick, now);
        store.append(tick.clone()).map_err(with)?;
        store.append_event(&event);
        store.journal_tick(op, &tick);
    }
    Ok((tick, warnings))
}
