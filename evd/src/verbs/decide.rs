//! `decide`: turn a request into the tick it would write, raising every refusal in upstream's
//! order (commands.md §3.3), then hand it to the shared write path. The rules are pure; only
//! [`decide`] touches the store.

use proto::model::{is_40_lower_hex, Check, Ground, Liveness};
use proto::rpc::{Context, DecideRequest, DecideResult, DraftGround, DraftKind, FromGit, Refusal};
use proto::vocab;

use super::common::tick_value;
use super::write_path::{self, NewTick};
use crate::open::OpenStore;

/// Everything of a new tick except what the store decides (parent, time, id).
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub decision: String,
    pub observe: String,
    pub grounds: Vec<Ground>,
    pub blame: String,
    pub authority: Option<String>,
    pub jurisdiction: Option<String>,
    pub source_ref: Option<String>,
}

/// The commit-subject roles `--from-git` recognises as a default blame.
pub const ROLES: [&str; 5] = ["Dev", "QA", "Product", "Mac", "User"];

fn refuse(reason: &str, msg: impl Into<String>) -> Refusal {
    Refusal::refused(reason, msg)
}

/// The checks evctl's stream walk performs, repeated here so a raw RPC client gets the same
/// refusals (fixed order, since the wire has no token order).
pub fn walk_checks(req: &DecideRequest) -> Result<(), Refusal> {
    if let Some(a) = &req.authority {
        vocab::check_authority(a).map_err(|m| refuse("authority_vocab", m))?;
    }
    if let Some(j) = &req.jurisdiction {
        vocab::check_jurisdiction(j).map_err(|m| refuse("jurisdiction_vocab", m))?;
    }
    if req.source_ref.as_deref() == Some("") {
        return Err(refuse(
            "source_ref_empty",
            "--source-ref needs a non-empty value",
        ));
    }
    if let Some(fg) = &req.from_git {
        if fg.rev.starts_with('-') {
            return Err(refuse(
                "from_git_flag",
                format!(
                    "--from-git takes a commit-ish, not a flag (got {})",
                    proto::json::q(&fg.rev)
                ),
            ));
        }
    }
    for g in &req.grounds {
        if g.kind == DraftKind::Rejected {
            let option = g.option.as_deref().unwrap_or("").trim();
            let why = g.why.as_deref().unwrap_or("").trim();
            if option.is_empty() || why.is_empty() {
                return Err(refuse(
                    "reject_shape",
                    "--reject needs non-empty <option> and <why>",
                ));
            }
        }
    }
    Ok(())
}

/// The observe text `--from-git` composes: the `--observe` value, the subject's round/issue
/// tokens, and the body's `Refs #` lines, empties dropped, joined by spaces.
pub fn from_git_observe(observe: Option<&str>, subject: &str, body: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(o) = observe {
        parts.push(o.to_string());
    }
    parts.extend(
        subject
            .split_whitespace()
            .filter(|t| vocab::is_round_or_issue_token(t))
            .map(str::to_string),
    );
    parts.extend(
        body.lines()
            .map(str::trim)
            .filter(|l| l.starts_with("Refs #"))
            .map(str::to_string),
    );
    parts.retain(|p| !p.is_empty());
    parts.join(" ")
}

/// The default blame of a commit: a leading `Role:` in the subject, else the author.
pub fn from_git_blame(subject: &str, author: &str) -> String {
    let first = subject.split_whitespace().next().unwrap_or("");
    if let Some(role) = first.strip_suffix(':') {
        if let Some(r) = ROLES.iter().find(|r| r.eq_ignore_ascii_case(role)) {
            return (*r).to_string();
        }
    }
    author.to_string()
}

/// Resolve the human blame: explicit (trimmed, must be non-empty), else the fallback, else the
/// caller's git user.name.
pub fn human_blame(
    explicit: Option<&str>,
    fallback: Option<String>,
    ctx: &Context,
) -> Result<String, Refusal> {
    if let Some(b) = explicit {
        let b = b.trim();
        if b.is_empty() {
            return Err(refuse("blame_empty", "--blame must be non-empty"));
        }
        return Ok(b.to_string());
    }
    if let Some(f) = fallback {
        return Ok(f);
    }
    match ctx.git.user_name.as_deref().map(str::trim) {
        Some(n) if !n.is_empty() => Ok(n.to_string()),
        _ => Err(refuse(
            "no_author",
            "no author: pass --blame, or set git config user.name",
        )),
    }
}

/// Resolve `verified_at_sha`: explicit (trimmed) or the caller's git HEAD, then the shape check.
pub fn resolve_sha(explicit: Option<&str>, ctx: &Context) -> Result<String, Refusal> {
    let sha = match explicit {
        Some(s) => s.trim().to_string(),
        None => ctx.git.head.clone().ok_or_else(|| {
            refuse(
                "sha_unresolvable",
                "cannot resolve verified_at_sha (not a git repo?) — pass --verified-at-sha",
            )
        })?,
    };
    if !is_40_lower_hex(&sha) {
        return Err(refuse(
            "sha_malformed",
            format!("verified_at_sha must be 40 lowercase hex: {sha}"),
        ));
    }
    Ok(sha)
}

fn liveness_of(g: &DraftGround) -> Liveness {
    Liveness {
        platforms: g.platforms.clone(),
        triggered_by: g.triggered_by.clone(),
        surfaces: g.surfaces.clone(),
    }
}

/// Build one ground, first failing rule wins (commands.md §3.3 step 5, with the [REC] refusals
/// of empty references and liveness values).
pub fn build_ground(
    g: &DraftGround,
    authority: Option<&str>,
    explicit_sha: Option<&str>,
    ctx: &Context,
) -> Result<Ground, Refusal> {
    let (claim, supports) = match g.kind {
        DraftKind::Chosen => (g.claim.clone().unwrap_or_default(), "chosen".to_string()),
        DraftKind::Rejected => (
            g.why.as_deref().unwrap_or("").trim().to_string(),
            format!("rejected:{}", g.option.as_deref().unwrap_or("").trim()),
        ),
    };
    let rejected = g.kind == DraftKind::Rejected;
    if claim.is_empty() {
        return Err(refuse("claim_empty", "ground claim is empty"));
    }
    if rejected && g.revisit.is_some() {
        return Err(refuse(
            "rejected_revisit",
            "a road-not-taken (rejected) ground cannot carry a human re-check",
        ));
    }
    if rejected && g.test_ref.is_some() && authority != Some(vocab::USER_RULED) {
        return Err(refuse(
            "tripwire_needs_user_ruled",
            "a rejected road can carry a tripwire test only when the decision is --authority user-ruled",
        ));
    }
    if g.revisit.is_some() && g.test_ref.is_some() {
        return Err(refuse(
            "revisit_and_test",
            "a ground cannot be both --revisit and --assume-test (R2)",
        ));
    }
    let has_liveness_flags = g.counter_test.is_some()
        || !g.platforms.is_empty()
        || !g.triggered_by.is_empty()
        || !g.surfaces.is_empty();
    let check = if let Some(test_ref) = &g.test_ref {
        if test_ref.is_empty() {
            return Err(refuse("test_ref_empty", "test check ref is empty"));
        }
        let counter = match g.counter_test.as_deref() {
            Some(c) if !c.trim().is_empty() => c.to_string(),
            _ => {
                return Err(refuse(
                    "vacuous_binding",
                    "a test binding requires --counter-test (no vacuous binding)",
                ))
            }
        };
        if g.platforms.is_empty() || g.triggered_by.is_empty() || g.surfaces.is_empty() {
            return Err(refuse(
                "liveness_incomplete",
                "a test binding requires at least one --on-platform, --triggered-by, and --surface",
            ));
        }
        for (k, set) in [
            ("platforms", &g.platforms),
            ("triggered_by", &g.triggered_by),
            ("surfaces", &g.surfaces),
        ] {
            if set.iter().any(String::is_empty) {
                return Err(refuse(
                    "liveness_empty_value",
                    format!("liveness.{k} has an empty element"),
                ));
            }
        }
        let sha = resolve_sha(explicit_sha, ctx)?;
        Some(Check::Test {
            reference: test_ref.clone(),
            verified_at_sha: sha,
            counter_test: Some(counter),
            liveness: liveness_of(g).canonical(),
        })
    } else if let Some(revisit) = &g.revisit {
        if has_liveness_flags {
            return Err(liveness_without_test());
        }
        if revisit.is_empty() {
            return Err(refuse("revisit_empty", "person check ref is empty"));
        }
        Some(Check::Person {
            reference: revisit.clone(),
        })
    } else {
        if has_liveness_flags {
            return Err(liveness_without_test());
        }
        None
    };
    Ok(Ground {
        claim,
        supports,
        check,
    })
}

fn liveness_without_test() -> Refusal {
    refuse(
        "liveness_without_test",
        "--counter-test/--on-platform/--triggered-by/--surface require --assume-test",
    )
}

/// The decision text and blame fallback a request's source gives (positional or `--from-git`).
fn decision_source(req: &DecideRequest) -> Result<(String, String, Option<String>), Refusal> {
    match (&req.decision, &req.from_git) {
        (Some(_), Some(_)) => Err(refuse(
            "decision_twice",
            "decide: decision given twice (positional and --from-git)",
        )),
        (None, None) => Err(refuse(
            "decision_missing",
            "decide: needs a decision (positional) or --from-git",
        )),
        (Some(d), None) => Ok((d.clone(), req.observe.clone().unwrap_or_default(), None)),
        (None, Some(FromGit { rev, envelope })) => {
            let env = envelope.as_ref().ok_or_else(|| {
                refuse(
                    "commit_unreadable",
                    format!("decide: cannot read commit {rev}"),
                )
            })?;
            Ok((
                env.subject.clone(),
                from_git_observe(req.observe.as_deref(), &env.subject, &env.body),
                Some(from_git_blame(&env.subject, &env.author)),
            ))
        }
    }
}

/// Steps 1–5 of decide: everything before the shared write path.
pub fn build(req: &DecideRequest) -> Result<Draft, Refusal> {
    walk_checks(req)?;
    let (decision, observe, blame_fallback) = decision_source(req)?;
    if decision.trim().is_empty() {
        return Err(refuse("decision_empty", "decision text is empty"));
    }
    let blame = human_blame(req.blame.as_deref(), blame_fallback, &req.context)?;
    let grounds = req
        .grounds
        .iter()
        .map(|g| {
            build_ground(
                g,
                req.authority.as_deref(),
                req.verified_at_sha.as_deref(),
                &req.context,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Draft {
        decision,
        observe,
        grounds,
        blame,
        authority: req.authority.clone(),
        jurisdiction: req.jurisdiction.clone(),
        source_ref: req.source_ref.clone(),
    })
}

/// `decide`: validate, then the shared write path. Writes need the store lock (held by the
/// caller); a dry run writes nothing.
pub fn decide(store: &mut OpenStore, req: &DecideRequest) -> Result<DecideResult, Refusal> {
    let draft = build(req)?;
    let new = NewTick {
        decision: draft.decision,
        observe: draft.observe,
        grounds: draft.grounds,
        blame: draft.blame,
        authority: draft.authority,
        jurisdiction: draft.jurisdiction,
        source_ref: draft.source_ref.map(proto::SourceRef::Text),
        provenance: None,
        supersedes: None,
        ratifies: None,
    };
    let (tick, warnings) = write_path::write(store, new, "decide", req.dry_run)?;
    Ok(DecideResult {
        id: tick.id.clone(),
        ground_count: tick.grounds.len(),
        dry_run: req.dry_run,
        tick: tick_value(&tick.id, &tick),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::rpc::CommitEnvelope;

    fn ctx() -> Context {
        Context {
            store: "/tmp/x".into(),
            cwd: "/tmp/x".into(),
            agent_id: None,
            git: proto::rpc::GitFacts {
                user_name: Some("Git User".into()),
                head: Some("d308afac1b2c3d4e5f60718293a4b5c6d7e8f901".into()),
                upstream: None,
            },
            request_id: None,
            wait_ms: None,
        }
    }

    fn chosen(claim: &str) -> DraftGround {
        DraftGround {
            kind: DraftKind::Chosen,
            claim: Some(claim.into()),
            ..DraftGround::default()
        }
    }

    fn req(grounds: Vec<DraftGround>) -> DecideRequest {
        DecideRequest {
            context: ctx(),
            decision: Some("d".into()),
            grounds,
            ..DecideRequest::default()
        }
    }

    fn refusal(r: DecideRequest) -> String {
        build(&r).expect_err("refused").message
    }

    #[test]
    fn per_ground_rules_fire_in_order() {
        let mut g = chosen("c");
        g.test_ref = Some("t".into());
        assert_eq!(
            refusal(req(vec![g.clone()])),
            "a test binding requires --counter-test (no vacuous binding)"
        );
        g.counter_test = Some("ct".into());
        g.platforms = vec!["p".into()];
        assert_eq!(
            refusal(req(vec![g.clone()])),
            "a test binding requires at least one --on-platform, --triggered-by, and --surface"
        );
        g.revisit = Some("r".into());
        assert_eq!(
            refusal(req(vec![g.clone()])),
            "a ground cannot be both --revisit and --assume-test (R2)"
        );
        let mut r = DraftGround {
            kind: DraftKind::Rejected,
            option: Some("Redis".into()),
            why: Some("infra".into()),
            test_ref: Some("t".into()),
            ..DraftGround::default()
        };
        assert_eq!(
            refusal(req(vec![r.clone()])),
            "a rejected road can carry a tripwire test only when the decision is --authority user-ruled"
        );
        r.revisit = Some("x".into());
        assert_eq!(
            refusal(req(vec![r])),
            "a road-not-taken (rejected) ground cannot carry a human re-check"
        );
        let mut only_platform = chosen("c");
        only_platform.platforms = vec!["p".into()];
        assert_eq!(
            refusal(req(vec![only_platform])),
            "--counter-test/--on-platform/--triggered-by/--surface require --assume-test"
        );
        assert_eq!(refusal(req(vec![chosen("")])), "ground claim is empty");
    }

    #[test]
    fn blame_and_sha_fall_back_to_the_callers_git() {
        let mut g = chosen("c");
        g.test_ref = Some("t".into());
        g.counter_test = Some("ct".into());
        g.platforms = vec!["mac".into(), "linux-ci".into(), "mac".into()];
        g.triggered_by = vec!["f".into()];
        g.surfaces = vec!["s".into()];
        let d = build(&req(vec![g])).expect("builds");
        assert_eq!(d.blame, "Git User");
        match &d.grounds[0].check {
            Some(Check::Test {
                verified_at_sha,
                liveness,
                ..
            }) => {
                assert_eq!(verified_at_sha, "d308afac1b2c3d4e5f60718293a4b5c6d7e8f901");
                assert_eq!(liveness.platforms, vec!["linux-ci", "mac"]);
            }
            other => panic!("expected a test check, got {other:?}"),
        }
        let mut r = req(vec![]);
        r.context.git.user_name = None;
        assert_eq!(
            refusal(r),
            "no author: pass --blame, or set git config user.name"
        );
    }

    #[test]
    fn from_git_takes_subject_role_and_round_tokens() {
        let mut r = req(vec![]);
        r.decision = None;
        r.observe = Some("seen".into());
        r.from_git = Some(FromGit {
            rev: "HEAD".into(),
            envelope: Some(CommitEnvelope {
                subject: "qa: ship R12 now #3,".into(),
                author: "Ann".into(),
                body: "text\n  Refs #44 and more\nRefs x".into(),
            }),
        });
        let d = build(&r).expect("builds");
        assert_eq!(d.decision, "qa: ship R12 now #3,");
        assert_eq!(d.blame, "QA");
        assert_eq!(d.observe, "seen R12 Refs #44 and more");
    }
}
