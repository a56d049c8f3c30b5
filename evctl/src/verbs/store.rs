//! The store verbs: `init`, `show`, `list`, `log`, `verify` (and the store's audit, which
//! `verify --evidence` reuses), `doctor`.
//!
//! Each asks the session (evd, or in-process) and hands the answer to render; it must not print
//! by itself nor read the store's files directly (an answer file evd wrote aside).

use evd::api;
use proto::rpc::{
    DoctorRequest, IdRequest, ListForm, ListRequest, Refusal, StoreRequest, VerifyRequest,
};

use super::answer::open_answer;
use crate::context::Needs;
use crate::grammar::Globals;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, local_write, Session};
use crate::style::Style;

pub async fn init(s: &mut Session) -> Out {
    let ctx = s.context(false, Needs::default());
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let r = s
        .write(rpc!(req, init), || local_write(&ctx, api::init))
        .await;
    let json = s.json;
    s.finish(r, |v| render::init(v, json))
}

pub async fn show(s: &mut Session, id: &str) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = IdRequest {
        context: ctx.clone(),
        id: id.to_string(),
    };
    let r = s
        .read(rpc!(req, show), || {
            local_read(&ctx, |st| api::show(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| {
        let mut out = Out::default();
        if json {
            out.json(v);
        } else {
            out.line(&v.raw);
        }
        out
    })
}

pub async fn list(s: &mut Session, g: &Globals) -> Out {
    let ctx = s.context(true, Needs::default());
    let (style, json) = (Style::detect(g.color.as_deref(), g.plain), s.json);
    // The plain listing comes finished, in an answer file (a large store's is megabytes).
    let form = if json || style.rich {
        ListForm::Entries
    } else {
        ListForm::PlainFile
    };
    let req = ListRequest {
        context: ctx.clone(),
        form,
    };
    let mut r = s
        .read(rpc!(req, list), || {
            local_read(&ctx, |st| api::list(st, &req))
        })
        .await;
    if let Ok(v) = &mut r {
        if let Some(file) = v.plain_file.take() {
            match open_answer(&s.rt_dir, &file) {
                Some(f) => return render::list_plain(f, file.len),
                None => {
                    // Gone or unreadable: ask for the entries instead.
                    let req = ListRequest {
                        form: ListForm::Entries,
                        ..req
                    };
                    r = s
                        .read(rpc!(req, list), || {
                            local_read(&ctx, |st| api::list(st, &req))
                        })
                        .await;
                }
            }
        }
    }
    s.finish(r, |v| render::list(v, style, json))
}

pub async fn log(s: &mut Session, g: &Globals) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let r = s
        .read(rpc!(req, log), || local_read(&ctx, |st| api::log(st, &req)))
        .await;
    let (style, json) = (Style::detect(g.color.as_deref(), g.plain), s.json);
    s.finish(r, |v| render::log(v, style, json))
}

pub async fn verify(s: &mut Session, self_test: bool) -> Out {
    let json = s.json;
    if self_test {
        // Pure computation: no store, no daemon needed.
        return render::verify(&api::self_test(), json);
    }
    let r = audit(s).await;
    s.finish(r, |v| render::verify(v, json))
}

/// `doctor [--fix]`: what a hand-resolved or broken store holds, and (with `fix`) its repair.
pub async fn doctor(s: &mut Session, fix: bool) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = DoctorRequest {
        context: ctx.clone(),
        fix,
    };
    let r = if fix {
        s.write(rpc!(req, doctor), || {
            local_write(&ctx, |st| api::doctor(st, &req))
        })
        .await
    } else {
        s.read(rpc!(req, doctor), || {
            local_read(&ctx, |st| api::doctor(st, &req))
        })
        .await
    };
    let json = s.json;
    s.finish(r, |v| render::doctor(v, json))
}

/// The store's audit (`verify` without `--self-test`): from evd, or in-process.
pub async fn audit(s: &mut Session) -> Result<proto::rpc::VerifyResult, Refusal> {
    let ctx = s.context(true, Needs::default());
    let req = VerifyRequest {
        context: ctx.clone(),
        self_test: false,
    };
    s.read(rpc!(req, verify), || {
        local_read(&ctx, |st| api::verify(st, &req))
    })
    .await
}
