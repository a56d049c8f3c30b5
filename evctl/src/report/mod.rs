//! `evctl report`: one self-contained HTML page about the store — the decisions in effect and
//! their lineage, each test ground's verdict over time, calibration and routing and failures
//! from the event ledger, the evidence cited — with pictures.
//!
//! This file gathers the answers through the engine's door, as the other verbs do (`ev.log`,
//! `ev.guards`, `ev.evidence`, and `ev.ledger.query` for every ledger figure, so the page shows
//! the numbers `evctl ledger query` prints) into a [`data::Data`], and writes the page
//! atomically. The page is [`page`]'s, the pictures [`charts`]'s; it must not compute a figure
//! of its own.

pub mod charts;
pub mod data;
pub mod page;

use std::collections::BTreeMap;
use std::path::PathBuf;

use proto::rpc::{Refusal, StoreRequest};

use data::Data;

use crate::context::Needs;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, Session};

/// `evctl report`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Where to write the page (default: evctl-report.html in the current directory).
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
    /// Draw verdict history from this time on (RFC 3339, or a date: 2026-11-01).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
}

/// The ledger questions the page draws.
const QUERIES: [&str; 7] = [
    "calibration",
    "reliability",
    "routing",
    "failures",
    "entropy",
    "decisions",
    "history",
];

/// `--since` as an RFC 3339 time (a bare date is its midnight, UTC).
fn since(arg: &str) -> Result<String, Refusal> {
    let t = if arg.len() == 10 {
        format!("{arg}T00:00:00Z")
    } else {
        arg.to_string()
    };
    match evd::api::shared::clock::parse(&t) {
        Some(_) => Ok(t),
        None => Err(Refusal::refused(
            "since",
            format!("--since {arg:?} is not a date (2026-11-01) or an RFC 3339 time"),
        )),
    }
}

async fn gather(s: &mut Session, since: Option<String>) -> Result<Data, Refusal> {
    let ctx = s.context(true, Needs::default());
    let store = s.root(true).display().to_string();
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let log = s
        .read(rpc!(req, log), || {
            local_read(&ctx, |st| evd::api::log(st, &req))
        })
        .await?;
    let greq = proto::rpc::GuardsRequest {
        context: crate::verbs::verdict_context(s, false),
        all_evidence: true,
        ..Default::default()
    };
    let guards = crate::verbs::ask_guards(s, greq).await?;
    let evidence = crate::evidence::evidence(s).await?;
    // Every ledger figure in one read of the ledger.
    let req = proto::rpc::LedgerQueryRequest {
        context: ctx.clone(),
        queries: QUERIES.iter().map(|q| q.to_string()).collect(),
        ..Default::default()
    };
    let v = s
        .read(rpc!(req, ledger_query), || {
            local_read(&ctx, |st| evd::api::ledger_query(st, &req))
        })
        .await?;
    let queries: BTreeMap<String, serde_json::Value> = match v.get("answers") {
        Some(serde_json::Value::Object(m)) => m.clone().into_iter().collect(),
        _ => {
            return Err(Refusal::io(
                "the ledger's answers did not come back as expected (is evd of another build?)",
            ))
        }
    };
    Ok(Data {
        store,
        now: evd::api::shared::clock::now_rfc3339(),
        since,
        log,
        guards,
        evidence,
        queries,
    })
}

pub async fn run(s: &mut Session, a: ReportArgs) -> Out {
    let json = s.json;
    let since = match a.since.as_deref().map(since).transpose() {
        Ok(v) => v,
        Err(e) => return render::refusal(&e, json),
    };
    let data = match gather(s, since).await {
        Ok(d) => d,
        Err(e) => return render::refusal(&e, json),
    };
    let html = page::render(&data);
    let path = a.out.unwrap_or_else(|| s.cwd.join("evctl-report.html"));
    let path = if path.is_relative() {
        s.cwd.join(path)
    } else {
        path
    };
    let dir = path
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| s.cwd.clone());
    if let Err(e) = evd::api::shared::fsio::replace_atomically(&dir, &path, html.as_bytes()) {
        return render::refusal(
            &Refusal::io(format!("cannot write {}: {e}", path.display())),
            json,
        );
    }
    let mut out = Out::default();
    if json {
        out.json(&serde_json::json!({"path": path.display().to_string(), "bytes": html.len()}));
    } else {
        out.line(format!(
            "wrote {} ({} KiB): open it in a browser",
            path.display(),
            html.len().div_ceil(1024)
        ));
    }
    out
}
