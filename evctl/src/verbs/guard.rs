//! `guard`: bind a test to an unbound ground of HEAD after the fact (a child tick), with
//! upstream's fixed flag set.
//!
//! It must not run the test (that is `check --run`) nor print by itself.

use evd::api;
use proto::rpc::GuardRequest;

use crate::context::Needs;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_write, Session};

/// `guard`'s fixed flag set (upstream's, flag for flag).
#[derive(clap::Args, Debug)]
pub struct GuardArgs {
    /// The test that passes while the claim holds.
    #[arg(allow_hyphen_values = true)]
    pub selector: String,
    /// HEAD's id (guard only amends the current HEAD).
    pub id: String,
    /// The ground: its claim, or its zero-based index among all grounds.
    pub target: Option<String>,
    /// The test that flips red if the claim breaks.
    #[arg(long, allow_hyphen_values = true)]
    pub counter_test: String,
    /// Where the test must keep running (repeatable, at least one).
    #[arg(long = "on-platform", value_name = "P")]
    pub platforms: Vec<String>,
    /// A path whose change makes the last run stale (repeatable, at least one).
    #[arg(long = "triggered-by", value_name = "PATH")]
    pub triggered_by: Vec<String>,
    /// What the test guards (repeatable, at least one).
    #[arg(long = "surface", value_name = "S")]
    pub surfaces: Vec<String>,
    /// The commit the test was verified at (default: git HEAD).
    #[arg(long, value_name = "SHA")]
    pub verified_at_sha: Option<String>,
    /// Who is on the hook (default: git config user.name).
    #[arg(long)]
    pub blame: Option<String>,
    /// user-ruled | agent-disposable (the child's only; not inherited).
    #[arg(long)]
    pub authority: Option<String>,
}

pub async fn guard(s: &mut Session, a: GuardArgs) -> Out {
    let ctx = s.context(
        true,
        Needs {
            user_name: a.blame.is_none(),
            head: a.verified_at_sha.is_none(),
            upstream: false,
        },
    );
    let req = GuardRequest {
        context: ctx.clone(),
        selector: a.selector,
        id: a.id,
        target: a.target,
        counter_test: a.counter_test,
        platforms: a.platforms,
        triggered_by: a.triggered_by,
        surfaces: a.surfaces,
        verified_at_sha: a.verified_at_sha,
        blame: a.blame,
        authority: a.authority,
    };
    let r = s
        .write(rpc!(req, guard), || {
            local_write(&ctx, |st| api::guard(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| render::guard(v, json))
}
