//! Reading decisions back: `brief` (the rulings to read first), `why` (what a selector guards)
//! and `reopen` (one decision, its tags, edges and what each test ground reads now).
//!
//! It must not write to the store nor print by itself.

use evd::api;
use proto::rpc::IdRequest;

use crate::context::Needs;
use crate::grammar::Globals;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, Session};
use crate::style::Style;

pub async fn brief(s: &mut Session, g: &Globals, limit: Option<u64>) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = proto::rpc::BriefRequest {
        context: ctx.clone(),
        limit,
    };
    let r = s
        .read(rpc!(req, brief), || {
            local_read(&ctx, |st| api::brief(st, &req))
        })
        .await;
    let (style, json) = (Style::detect(g.color.as_deref(), g.plain), s.json);
    s.finish(r, |v| render::brief(v, style, json))
}

pub async fn why(s: &mut Session, selector: String) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = proto::rpc::WhyRequest {
        context: ctx.clone(),
        selector,
    };
    let r = s
        .read(rpc!(req, why), || local_read(&ctx, |st| api::why(st, &req)))
        .await;
    let json = s.json;
    s.finish(r, |v| render::why(v, json))
}

pub async fn reopen(s: &mut Session, g: &Globals, id: String) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = IdRequest {
        context: ctx.clone(),
        id,
    };
    let r = s
        .read(rpc!(req, reopen), || {
            local_read(&ctx, |st| api::reopen(st, &req))
        })
        .await;
    let (style, json) = (Style::detect(g.color.as_deref(), g.plain), s.json);
    s.finish(r, |v| render::reopen(v, style, json))
}
