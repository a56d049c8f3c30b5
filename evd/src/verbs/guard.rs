//! `guard "<selector>" <id> [<target>]`: bind a test to an unbound ground of HEAD after the fact.
//! A check is hashed, so this writes a new child; the parent stays as history.

use proto::model::{Check, Liveness};
use proto::rpc::{codes, GuardRequest, GuardResult, Refusal};
use proto::vocab::{self, USER_RULED};
use proto::Ground;

use super::common::{lookup, tick_value, Lookup};
use super::decide::{human_blame, resolve_sha};
use super::write_path::{self, NewTick};
use crate::open::OpenStore;

fn refuse(reason: &str, msg: impl Into<String>) -> Refusal {
    Refusal::refused(reason, msg)
}

/// Which ground a target names: none (the only unbound one), an index into all grounds, or a
/// claim matched exactly.
pub fn resolve_target(grounds: &[Ground], target: Option<&str>) -> Result<usize, Refusal> {
    match target {
        None => {
            let unbound: Vec<usize> = (0..grounds.len())
                .filter(|&i| grounds[i].check.is_none())
                .collect();
            match unbound.as_slice() {
                [] => Err(refuse("no_unbound_ground", "no unbound ground to guard")),
                [only] => Ok(*only),
                _ => Err(refuse(
                    "target_required",
                    "more than one unbound ground — name the target (claim or index)",
                )),
            }
        }
        Some(t) => {
            if let Ok(i) = t.parse::<usize>() {
                return if i < grounds.len() {
                    Ok(i)
                } else {
                    Err(refuse(
                        "target_out_of_range",
                        format!("ground index {i} out of range"),
                    ))
                };
            }
            let hits: Vec<usize> = (0..grounds.len())
                .filter(|&i| grounds[i].claim == t)
                .collect();
            match hits.as_slice() {
                [] => Err(refuse(
                    "target_missing",
                    format!("no ground with claim {}", proto::json::q(t)),
                )),
                [only] => Ok(*only),
                _ => Err(refuse(
                    "target_ambiguous",
                    format!(
                        "ambiguous: multiple grounds with claim {}",
                        proto::json::q(t)
                    ),
                )),
            }
        }
    }
}

pub fn guard(store: &mut OpenStore, req: &GuardRequest) -> Result<GuardResult, Refusal> {
    let parent = match lookup(store, &req.id)? {
        Lookup::Missing => {
            return Err(Refusal::new(
                codes::NOT_FOUND,
                "not_found",
                format!("no tick with id {}", req.id),
            ))
        }
        Lookup::Broken(e) => return Err(Refusal::io(e)),
        Lookup::Found(t) => t,
    };
    let head = store.head()?;
    if req.id != head {
        return Err(refuse(
            "not_head",
            format!(
                "guard can only amend the current HEAD decision; {} is not HEAD ({head})",
                req.id
            ),
        ));
    }
    let index = resolve_target(&parent.grounds, req.target.as_deref())?;
    let ground = &parent.grounds[index];
    if matches!(ground.check, Some(Check::Person { .. })) {
        return Err(refuse(
            "person_ground",
            "a human-rechecked ground cannot carry a test (R2 hard error)",
        ));
    }
    if let Some(a) = &req.authority {
        vocab::check_authority(a).map_err(|m| refuse("authority_vocab", m))?;
    }
    if ground.is_rejected() && req.authority.as_deref() != Some(USER_RULED) {
        return Err(refuse(
            "tripwire_needs_user_ruled",
            "a rejected road can carry a tripwire test only when guarded with --authority user-ruled",
        ));
    }
    if ground.check.is_some() {
        return Err(refuse("already_bound", "ground already has a check"));
    }
    // [REC] an empty selector would write a tick the reader rejects.
    if req.selector.is_empty() {
        return Err(refuse("test_ref_empty", "test check ref is empty"));
    }
    if req.counter_test.trim().is_empty() {
        return Err(refuse(
            "vacuous_binding",
            "a test binding requires a counter-test (no vacuous binding)",
        ));
    }
    if req.platforms.is_empty() || req.triggered_by.is_empty() || req.surfaces.is_empty() {
        return Err(refuse(
            "liveness_incomplete",
            "a test binding requires at least one platform, triggered-by, and surface",
        ));
    }
    for (k, set) in [
        ("platforms", &req.platforms),
        ("triggered_by", &req.triggered_by),
        ("surfaces", &req.surfaces),
    ] {
        if set.iter().any(String::is_empty) {
            return Err(refuse(
                "liveness_empty_value",
                format!("liveness.{k} has an empty element"),
            ));
        }
    }
    let sha = resolve_sha(req.verified_at_sha.as_deref(), &req.context)?;
    let blame = human_blame(req.blame.as_deref(), None, &req.context)?;
    let mut grounds = parent.grounds.clone();
    grounds[index].check = Some(Check::Test {
        reference: req.selector.clone(),
        verified_at_sha: sha,
        counter_test: Some(req.counter_test.clone()),
        liveness: Liveness {
            platforms: req.platforms.clone(),
            triggered_by: req.triggered_by.clone(),
            surfaces: req.surfaces.clone(),
        }
        .canonical(),
    });
    let new = NewTick {
        decision: parent.decision.clone(),
        observe: parent.observe.clone(),
        grounds,
        blame,
        // Authority is the flag's only: a user-ruled parent guarded without it loses the tag.
        authority: req.authority.clone(),
        jurisdiction: parent.jurisdiction.clone(),
        source_ref: parent.source_ref.clone(),
        provenance: None,
        supersedes: None,
        ratifies: None,
    };
    let (tick, warnings) = write_path::write(store, new, "guard", false)?;
    Ok(GuardResult {
        child_id: tick.id.clone(),
        parent_id: req.id.clone(),
        ground_index: index,
        tick: tick_value(&tick.id, &tick),
        warnings,
    })
}
