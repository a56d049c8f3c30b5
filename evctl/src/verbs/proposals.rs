//! `pending` and `ratify`: the agent proposals awaiting a human, and a named human raising one to
//! a user-ruled decision.
//!
//! It must not record proposals (that is `propose`, in `record.rs`) nor print by itself.

use evd::api;
use proto::rpc::{PendingRequest, RatifyRequest};

use crate::context::Needs;
use crate::grammar::Globals;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, local_write, Session};
use crate::style::Style;

pub async fn pending(s: &mut Session, g: &Globals, source_ref: Option<String>) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = PendingRequest {
        context: ctx.clone(),
        source_ref,
    };
    let r = s
        .read(rpc!(req, pending), || {
            local_read(&ctx, |st| api::pending(st, &req))
        })
        .await;
    let (style, json) = (Style::detect(g.color.as_deref(), g.plain), s.json);
    s.finish(r, |v| render::pending(v, style, json))
}

pub async fn ratify(s: &mut Session, id: String, blame: String) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = RatifyRequest {
        context: ctx.clone(),
        id,
        blame,
    };
    let r = s
        .write(rpc!(req, ratify), || {
            local_write(&ctx, |st| api::ratify(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| render::ratify(v, json))
}
