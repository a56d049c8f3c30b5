//! `check`: the verdict of every binding, plain rows straight from evd's answer file when it
//! can, and the verdict context every verdict read needs (the git fact the staleness policy
//! reads), shared with `guards`, the git hooks and the editor.
//!
//! It must not run tests (`check_run.rs` does, for `--run`) nor print by itself.

use evd::api;
use proto::rpc::Refusal;

use super::answer::{open_answer, read_answer};
use super::check_run::{run_tests, TestRun};
use crate::context::Needs;
use crate::grammar::Globals;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, Session};
use crate::style::Style;

/// `check`'s flags (upstream's, flag for flag).
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Run each bound test (and counter-test) here first, recording a receipt.
    #[arg(long)]
    pub run: bool,
    /// The platform a --run speaks for.
    #[arg(long, value_name = "P", default_value = "local")]
    pub platform: String,
    /// Exit 1 when any verdict gates.
    #[arg(long)]
    pub exit_on_red: bool,
    /// Take the staleness reference from the cache only.
    #[arg(long)]
    pub offline: bool,
    /// The platforms this runner attests (comma-separated; repeatable). Omitted: all declared.
    #[arg(long, value_name = "P1,P2", allow_hyphen_values = true)]
    pub attest: Vec<String>,
}

/// Print one line to stderr now (test output interleaves with ours during --run).
fn warn_now(line: &str) {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let mut e = std::io::stderr();
    let _ = writeln!(e, "{line}");
    let _ = e.flush();
}

/// The context a verdict read needs: the git fact the store's staleness policy reads (HEAD for
/// `local-head`, the upstream for `live-origin`; none offline).
pub fn verdict_context(s: &Session, offline: bool) -> proto::rpc::Context {
    let root = s.root(true);
    let policy = evd::api::shared::config::Config::parse(
        evd::api::shared::fsio::read_text(&root.join(".evolving").join("config"))
            .ok()
            .as_deref(),
    )
    .staleness_ref;
    let needs = Needs {
        user_name: false,
        head: !offline && policy == "local-head",
        upstream: !offline && policy != "local-head" && policy != "none",
    };
    s.context(true, needs)
}

pub async fn check(s: &mut Session, g: &Globals, a: CheckArgs) -> Out {
    let style = Style::detect(g.color.as_deref(), g.plain);
    let ctx = verdict_context(s, a.offline);
    if a.run {
        let how = TestRun {
            platform: &a.platform,
            tick: None,
            detached: false,
            limit: None,
        };
        if let Err(e) = run_tests(s, &ctx, &how, &mut warn_now).await {
            return render::refusal(&e, s.json);
        }
    }
    let attest: Vec<String> = a
        .attest
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::to_string)
        .collect();
    let req = proto::rpc::CheckRequest {
        context: ctx.clone(),
        offline: a.offline,
        attest: (!attest.is_empty()).then_some(attest),
        ran: a.run,
        // --json shows the row objects; the rich form needs a little more than the plain lines.
        form: if s.json {
            proto::rpc::RowForm::Objects
        } else if style.rich {
            proto::rpc::RowForm::Table
        } else {
            proto::rpc::RowForm::PlainFile
        },
    };
    let json = s.json;
    if req.form == proto::rpc::RowForm::PlainFile {
        // The rows go from evd's answer file to stdout without passing through this process.
        let mut r = s
            .read(rpc!(req, check), || {
                local_read(&ctx, |st| api::check(st, &req))
            })
            .await;
        if let Ok(v) = &mut r {
            if let Some(file) = v.plain_file.take() {
                if let Some(f) = open_answer(&s.rt_dir, &file) {
                    let rows = Some((f, file.len));
                    return render::check_with(v, rows, style, json, a.exit_on_red);
                }
                // Gone or unreadable: ask for the rows inline.
                let req = proto::rpc::CheckRequest {
                    form: proto::rpc::RowForm::Plain,
                    ..req
                };
                r = s
                    .read(rpc!(req, check), || {
                        local_read(&ctx, |st| api::check(st, &req))
                    })
                    .await;
            }
        }
        return s.finish(r, |v| render::check(v, style, json, a.exit_on_red));
    }
    let r = check_answer(s, &ctx, req).await;
    s.finish(r, |v| render::check(v, style, json, a.exit_on_red))
}

/// `ev.check`, from evd or in-process, with plain rows left in an answer file read back (or
/// asked for inline when that file cannot be read).
pub async fn check_answer(
    s: &mut Session,
    ctx: &proto::rpc::Context,
    req: proto::rpc::CheckRequest,
) -> Result<proto::rpc::CheckResult, Refusal> {
    // check writes only per-host caches (state files, events): in-process it needs no ledger
    // lock, and it may be answered again if a daemon's answer was lost.
    let mut r = s
        .read(rpc!(req, check), || {
            local_read(ctx, |st| api::check(st, &req))
        })
        .await;
    if let Ok(v) = &mut r {
        if let Some(file) = v.plain_file.take() {
            match read_answer(&s.rt_dir, &file) {
                Some(text) => v.plain = Some(proto::rpc::PlainRows::Text(text)),
                None => {
                    // Gone or unreadable (a daemon in another mount namespace?): ask for the
                    // rows inline instead.
                    let req = proto::rpc::CheckRequest {
                        form: proto::rpc::RowForm::Plain,
                        ..req
                    };
                    r = s
                        .read(rpc!(req, check), || {
                            local_read(ctx, |st| api::check(st, &req))
                        })
                        .await;
                }
            }
        }
    }
    r
}
