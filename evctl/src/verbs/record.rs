//! `decide`, `propose` and `supersede`: the verbs that read their own left-to-right flag stream
//! (dispatched before clap), turn it into a request with the git facts it needs, and record it.
//!
//! The stream's grammar is `grammar.rs`'s; this file must not parse flags itself, nor print by
//! itself.

use std::path::PathBuf;

use evd::api::{self, shared};
use proto::rpc::{
    DecideRequest, FromGit, Overturn, ProposeRequest, Refusal, SupersedeMode, SupersedeRequest,
};

use crate::context::{self, Needs};
use crate::grammar::{self, Globals, Walk};
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_write, Session};

/// Print a subcommand's long help (for the verbs that read their own stream).
fn help_of(verb: &str) -> Out {
    Out::raw(crate::long_help(verb))
}

fn usage(e: String) -> Out {
    Out::usage(&e)
}

fn wants_help(tokens: &[String]) -> bool {
    matches!(
        tokens.first().map(String::as_str),
        Some("-h") | Some("--help")
    )
}

/// The git facts a walked stream needs, and the `--from-git` commit it names.
fn walk_context(
    s: &Session,
    w: &Walk,
    human_blame: bool,
) -> (proto::rpc::Context, Option<FromGit>) {
    let needs_head =
        w.verified_at_sha.is_none() && w.grounds.iter().any(|gr| gr.test_ref.is_some());
    let ctx = s.context(
        true,
        Needs {
            user_name: human_blame && w.blame.is_none(),
            head: needs_head,
            upstream: false,
        },
    );
    let root = PathBuf::from(&ctx.store);
    let from_git = w.from_git.as_ref().map(|rev| FromGit {
        rev: rev.clone(),
        envelope: context::commit_envelope(&root, rev),
    });
    (ctx, from_git)
}

pub async fn decide(tokens: &[String], mut g: Globals) -> Out {
    if wants_help(tokens) {
        return help_of("decide");
    }
    let (positional, stream) = match grammar::split_positional(tokens, &mut g) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let (dry_run, stream) = match grammar::lift_globals(&stream, true, &mut g) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let walk = match grammar::walk(positional, &stream) {
        Ok(w) => w,
        Err(e) => return render::refusal(&Refusal::refused("walk", e), g.json),
    };
    let mut s = Session::new(&g);
    let (ctx, from_git) = walk_context(&s, &walk, true);
    let req = DecideRequest {
        context: ctx.clone(),
        decision: walk.decision,
        from_git,
        observe: walk.observe,
        blame: walk.blame,
        verified_at_sha: walk.verified_at_sha,
        authority: walk.authority,
        jurisdiction: walk.jurisdiction,
        source_ref: walk.source_ref,
        grounds: walk.grounds,
        dry_run,
    };
    let r = s
        .write(rpc!(req, decide), || {
            local_write(&ctx, |st| api::decide(st, &req))
        })
        .await;
    let json = g.json;
    s.finish(r, |v| render::decide(v, json))
}

pub async fn propose(tokens: &[String], mut g: Globals) -> Out {
    if wants_help(tokens) {
        return help_of("propose");
    }
    let (positional, stream) = match grammar::split_positional(tokens, &mut g) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let (_, stream) = match grammar::lift_globals(&stream, false, &mut g) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    // What would make a proposal bound or authoritative is refused anywhere in the stream,
    // value positions included, as upstream does.
    if let Some(f) = stream
        .iter()
        .find(|t| grammar::refused_by(grammar::PROPOSE).any(|f| f == t.as_str()))
    {
        return render::refusal(&shared::unbound_refusal(f), g.json);
    }
    let walk = match grammar::walk(positional, &stream) {
        Ok(w) => w,
        Err(e) => return render::refusal(&Refusal::refused("walk", e), g.json),
    };
    let mut s = Session::new(&g);
    let (ctx, from_git) = walk_context(&s, &walk, false);
    let req = ProposeRequest {
        context: ctx.clone(),
        decision: walk.decision,
        from_git,
        observe: walk.observe,
        blame: walk.blame,
        jurisdiction: walk.jurisdiction,
        source_ref: walk.source_ref,
        grounds: walk.grounds,
        authority: None,
        verified_at_sha: None,
    };
    let r = s
        .write(rpc!(req, propose), || {
            local_write(&ctx, |st| api::propose(st, &req))
        })
        .await;
    let json = g.json;
    s.finish(r, |v| render::propose(v, json))
}

/// `supersede <id> [<new ruling>] …`: a second positional (not hyphen-leading) overturns;
/// otherwise the stream re-tags.
pub async fn supersede(tokens: &[String], mut g: Globals) -> Out {
    if wants_help(tokens) {
        return help_of("supersede");
    }
    let lead = match grammar::take_globals(tokens, &mut g) {
        Ok(n) => n,
        Err(e) => return usage(e),
    };
    let Some(id) = tokens.get(lead).filter(|t| !t.starts_with('-')).cloned() else {
        return usage(format!(
            "the following required arguments were not provided:\n  <ID>\n\n{}\n\nFor more information, try '--help'.",
            crate::usage_of("supersede")
        ));
    };
    let (ruling, stream) = match grammar::split_positional(&tokens[lead + 1..], &mut g) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let (_, stream) = match grammar::lift_globals(&stream, false, &mut g) {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let mut s;
    let req = match ruling {
        None => {
            let (tags, blame) = match grammar::retag_stream(&stream) {
                Ok(v) => v,
                Err(e) => return render::refusal(&Refusal::refused("retag_args", e), g.json),
            };
            s = Session::new(&g);
            let ctx = s.context(
                true,
                Needs {
                    user_name: blame.is_none(),
                    ..Needs::default()
                },
            );
            SupersedeRequest {
                context: ctx,
                id,
                mode: SupersedeMode::Retag,
                blame,
                retag: Some(tags),
                overturn: None,
            }
        }
        Some(text) => {
            let w = match grammar::walk(Some(text), &stream) {
                Ok(w) => w,
                Err(e) => return render::refusal(&Refusal::refused("walk", e), g.json),
            };
            s = Session::new(&g);
            let (ctx, from_git) = walk_context(&s, &w, true);
            SupersedeRequest {
                context: ctx,
                id,
                mode: SupersedeMode::Overturn,
                blame: w.blame,
                retag: None,
                overturn: Some(Overturn {
                    decision: w.decision.unwrap_or_default(),
                    observe: w.observe,
                    verified_at_sha: w.verified_at_sha,
                    authority: w.authority,
                    jurisdiction: w.jurisdiction,
                    source_ref: w.source_ref,
                    from_git,
                    grounds: w.grounds,
                }),
            }
        }
    };
    let ctx = req.context.clone();
    let r = s
        .write(rpc!(req, supersede), || {
            local_write(&ctx, |st| api::supersede(st, &req))
        })
        .await;
    let json = g.json;
    s.finish(r, |v| render::supersede(v, json))
}
