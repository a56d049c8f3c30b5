//! The verbs that talk to a running evd only: `status`, `shutdown` and `watch` (a live stream
//! of verdict changes). None starts a daemon, and none answers in-process: without evd they say
//! so.
//!
//! It must not read the store nor print verdicts by itself (render's `watch_line` does).

use std::path::Path;

use evd::api::shared::paths;
use proto::rpc::{Refusal, StoreRequest};

use crate::client;
use crate::context::Needs;
use crate::grammar::Globals;
use crate::render::{self, Out};
use crate::session::{call_error, Session};

pub async fn status(g: &Globals) -> Out {
    let rt = paths::runtime_dir();
    match client::connect_existing(&rt).await {
        Ok(conn) => match proto::rpc::EvApiClient::status(&*conn.client).await {
            Ok(st) => render::status(&st, g.json),
            Err(e) => render::refusal(&call_error(e), g.json),
        },
        Err(e) => not_running(&rt, &e, g.json, 1),
    }
}

fn not_running(rt: &Path, why: &str, json: bool, code: u8) -> Out {
    let mut out = Out {
        code,
        ..Out::default()
    };
    let sock = paths::socket_path(rt);
    // Alive but silent is not "not running".
    if let Some(h) = client::live_daemon(rt) {
        out.code = 1;
        let said = client::not_answering(&h, rt);
        if json {
            out.json(&serde_json::json!({"running": true, "answering": false, "pid": h.pid, "socket": sock.display().to_string(), "detail": said}));
        } else {
            out.err(format!("error: {said}"));
        }
        return out;
    }
    if json {
        out.json(&serde_json::json!({"running": false, "socket": sock.display().to_string(), "detail": why}));
    } else {
        out.line(format!("evd is not running (socket {})", sock.display()));
    }
    out
}

pub async fn shutdown(g: &Globals) -> Out {
    let rt = paths::runtime_dir();
    let conn = match client::connect_existing(&rt).await {
        Ok(c) => c,
        Err(e) => return not_running(&rt, &e, g.json, 0),
    };
    let pid = conn.hello.pid;
    let asked = proto::rpc::EvApiClient::shutdown(&*conn.client).await;
    drop(conn);
    if let Err(e) = asked {
        return render::refusal(&call_error(e), g.json);
    }
    // Answer only once it is really gone: its stores and socket are released by then.
    if !client::wait_process_gone(&rt, pid).await {
        return render::refusal(
            &Refusal::new(
                proto::rpc::codes::STOPPING,
                "still_running",
                format!(
                    "asked evd pid {pid} to stop, but it is still running 5 s later; stop it with \
                     `kill {pid}` (or `kill -9 {pid}` if that does not end it)"
                ),
            ),
            g.json,
        );
    }
    let mut out = Out::default();
    if g.json {
        out.json(&serde_json::json!({"stopped": true, "pid": pid}));
    } else {
        out.line(format!("stopped evd pid {pid}"));
    }
    out
}

/// `watch`: print each verdict change of the store as evd pushes it, until interrupted (or the
/// daemon stops). Needs evd: there is nothing to push in-process.
pub async fn watch(s: &mut Session) -> Out {
    use std::io::Write;
    let ctx = s.context(true, Needs::default());
    let req = StoreRequest { context: ctx };
    let json = s.json;
    let Some(c) = s.daemon().await else {
        let why = s.unreachable_reason().unwrap_or("no daemon").to_string();
        return render::refusal(
            &Refusal::refused(
                "watch_needs_daemon",
                format!("evctl watch needs evd ({why})"),
            ),
            json,
        );
    };
    let mut sub = match proto::rpc::EvApiClient::watch(&*c, req).await {
        Ok(sub) => sub,
        Err(e) => return render::refusal(&call_error(e), json),
    };
    while let Some(item) = sub.next().await {
        let line = match item {
            Ok(ev) => render::watch_line(&ev, json),
            Err(e) => {
                return render::refusal(&Refusal::io(format!("the watch stream broke: {e}")), json)
            }
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return Out::default(); // the reader went away (a closed pipe)
        }
    }
    let mut out = Out {
        code: 1,
        ..Out::default()
    };
    out.err("evctl watch: evd stopped; the stream ended");
    out
}
