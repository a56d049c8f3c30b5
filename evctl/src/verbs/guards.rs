//! `guards [PATH]…`: which current decisions guard these files, each with the verdict that
//! speaks for it; and the `ev.guards` question itself, which the git hooks and the editor ask too.
//!
//! It must not judge verdicts nor print by itself.

use evd::api;
use proto::rpc::Refusal;

use super::check::verdict_context;
use crate::context;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, Session};

/// The current decisions guarding `paths` (store-relative; `None`: every guarded path), with
/// check's verdicts: from evd, or in-process.
pub async fn guards_of(
    s: &mut Session,
    paths: Option<Vec<String>>,
) -> Result<proto::rpc::GuardsResult, Refusal> {
    let req = proto::rpc::GuardsRequest {
        context: verdict_context(s, false),
        paths,
        ..Default::default()
    };
    ask_guards(s, req).await
}

/// Ask `ev.guards` as given (its context built with [`verdict_context`]): from evd, or
/// in-process.
pub async fn ask_guards(
    s: &mut Session,
    req: proto::rpc::GuardsRequest,
) -> Result<proto::rpc::GuardsResult, Refusal> {
    let ctx = req.context.clone();
    s.read(rpc!(req, guards), || {
        local_read(&ctx, |st| api::guards(st, &req))
    })
    .await
}

/// `guards [PATH]…`: which current decisions guard these files (every guarded file without
/// paths), each with the verdict that speaks for it.
pub async fn guards(s: &mut Session, paths: Vec<String>) -> Out {
    let root = s.root(true);
    let mut rel = Vec::with_capacity(paths.len());
    for p in &paths {
        match context::store_relative(&root, &s.cwd, p) {
            Ok(r) => rel.push(r),
            Err(e) => return render::refusal(&Refusal::refused("path_outside_store", e), s.json),
        }
    }
    let r = guards_of(s, (!paths.is_empty()).then_some(rel)).await;
    let json = s.json;
    s.finish(r, |v| render::guards(v, json))
}
