//! `reverify [<id>…]`: get decisions that read stale after a commit touched what they guard back
//! to green in one command. Have evd record each re-verification that holds at HEAD already (as a
//! child tick), run here the missing bound tests of this platform for the others (as `check
//! --run` does, recording receipts), then have evd record those that now hold.
//!
//! It must not judge whether a decision holds (evd does, from the receipts) nor print by itself.

use evd::api;
use proto::rpc::{Context, Refusal, ReverifyRequest, ReverifyResult, ReverifyStatus};

use super::check::verdict_context;
use super::check_run::{run_tests, TestRun};
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_write, Session};

/// `reverify`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ReverifyArgs {
    /// The decisions to re-verify (12-hex ids). None: every decision that reads stale because
    /// a commit since it was verified touched a path it guards.
    pub ids: Vec<String>,
    /// The platform the tests run here speak for: only bindings declaring it run.
    #[arg(long, value_name = "P", default_value = "local")]
    pub platform: String,
    /// Say what would be recorded, and which runs at HEAD are missing; run and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub async fn reverify(s: &mut Session, a: ReverifyArgs) -> Out {
    let json = s.json;
    let how = How {
        platform: &a.platform,
        dry_run: a.dry_run,
        // With --json, our stdout is the answer's: the tests' output goes to stderr.
        detached: json,
        limit: None,
    };
    match reverified(s, &a.ids, &how).await {
        Ok(r) => render::reverify(&r, a.dry_run, &a.platform, json),
        Err(e) => render::refusal(&e, json),
    }
}

/// How a re-verification runs the tests it lacks (see [`TestRun`]).
pub struct How<'a> {
    pub platform: &'a str,
    /// Run nothing, write nothing: what would be done.
    pub dry_run: bool,
    pub detached: bool,
    pub limit: Option<std::time::Duration>,
}

/// Re-verify `ids` (none: every decision a commit made stale): have evd record what already
/// holds at HEAD, run here the missing tests of `how.platform` for the rest, then have evd record
/// those that now hold. Test warnings go to stderr. The language server's `ev.reverify` calls
/// this too.
pub async fn reverified(
    s: &mut Session,
    ids: &[String],
    how: &How<'_>,
) -> Result<ReverifyResult, Refusal> {
    let mut ctx = verdict_context(s, false);
    let root = s.root(true);
    if ctx.git.head.is_none() {
        ctx.git.head = crate::context::git(&root, &["rev-parse", "HEAD"]);
    }
    // A decision whose runs at HEAD are all there and green is recorded by this first call (the
    // usual case after `check --run`: one request); the others come back saying what they lack.
    let mut first = ask(s, &ctx, ids, how.dry_run).await?;
    if how.dry_run {
        return Ok(first);
    }
    // The runs at HEAD this platform can make, for the decisions that lack one.
    let to_run: Vec<String> = first
        .outcomes
        .iter()
        .filter(|o| o.status == ReverifyStatus::NeedsRun)
        .filter(|o| o.missing.iter().any(|m| m.platform == how.platform))
        .map(|o| o.id.clone())
        .collect();
    if to_run.is_empty() {
        return Ok(first);
    }
    let mut ran = Vec::with_capacity(to_run.len());
    for id in &to_run {
        let run = TestRun {
            platform: how.platform,
            tick: Some(id),
            detached: how.detached,
            limit: how.limit,
        };
        // What the first call recorded stays said: a run that cannot be made is one more
        // outcome, not a refusal of the whole.
        match run_tests(s, &ctx, &run, &mut |w| eprintln!("{w}")).await {
            Ok(_) => ran.push(id.clone()),
            Err(e) => {
                if let Some(o) = first.outcomes.iter_mut().find(|o| &o.id == id) {
                    o.reason = Some(format!("its tests could not be run here: {}", e.message));
                }
            }
        }
    }
    if ran.is_empty() {
        return Ok(first);
    }
    let second = ask(s, &ctx, &ran, false).await?;
    // Each decision's outcome as the last call judged it, in the first call's order.
    for o in &mut first.outcomes {
        if let Some(now) = second.outcomes.iter().find(|n| n.id == o.id) {
            *o = now.clone();
        }
    }
    first.warnings.extend(second.warnings);
    Ok(first)
}

/// One `ev.reverify` call (a write, with a request id of its own).
async fn ask(
    s: &mut Session,
    ctx: &Context,
    ids: &[String],
    dry_run: bool,
) -> Result<ReverifyResult, Refusal> {
    let mut context = ctx.clone();
    context.request_id = Some(crate::context::new_request_id());
    let req = ReverifyRequest {
        context,
        ids: ids.to_vec(),
        dry_run,
    };
    s.write(rpc!(req, reverify), || {
        local_write(&req.context, |st| api::reverify(st, &req))
    })
    .await
}
