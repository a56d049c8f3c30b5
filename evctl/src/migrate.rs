//! `evctl migrate`: pick the mode (commands.md §8.1), read the files the command line names
//! (relative to the caller's working directory), ask evd, and print what upstream prints. The
//! backfill is one streamed call: evd reports progress as it goes, shown on stderr when stderr
//! is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use clap::Args;
use evd::api::{self, shared};
use jsonrpsee::core::client::{Client, Error as ClientError};
use proto::rpc::{
    BackfillRequest, BackfillResult, BindCheckRequest, EvApiClient, MapInput, MigrateEvent,
    MigrateProgress, ReconcileRequest, Refusal, SourceInput,
};

use crate::context;
use crate::render::{self, Out};
use crate::session::{local_read, local_write, Session};

/// The fixed flag set of `migrate` (upstream's, flag for flag).
#[derive(Args, Debug, Default)]
pub struct MigrateArgs {
    /// A source to import, as <kind>:<path> — kind is one of canonical, gitlog, to-human,
    /// decisions-immutable, escalation. Repeatable; records import in source-key order.
    #[arg(long = "source", value_name = "KIND:PATH")]
    pub sources: Vec<String>,
    /// Parse and resolve everything, report what would import, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Reconcile mode: compare the --against source with the store instead of importing.
    #[arg(long)]
    pub reconcile: bool,
    /// The source to reconcile against, as <kind>:<path> (with --reconcile).
    #[arg(long, value_name = "KIND:PATH")]
    pub against: Option<String>,
    /// Fallback author for records that name none (never taken from git config; a record with
    /// no author and no fallback is counted as a source-only gap, not imported).
    #[arg(long, value_name = "NAME")]
    pub blame: Option<String>,
    /// Harvest mode: print the harvested (counter-test-less) check this test selector would
    /// bind, with the liveness flags below. Writes nothing, needs no store.
    #[arg(long, value_name = "SELECTOR")]
    pub bind_check: Option<String>,
    /// A platform the --bind-check harvest declares (repeatable).
    #[arg(long = "on-platform", value_name = "PLATFORM")]
    pub platforms: Vec<String>,
    /// A triggered-by path the --bind-check harvest declares (repeatable).
    #[arg(long = "triggered-by", value_name = "PATH")]
    pub triggered_by: Vec<String>,
    /// A surface the --bind-check harvest declares (repeatable).
    #[arg(long = "surface", value_name = "SURFACE")]
    pub surfaces: Vec<String>,
    /// The 40-hex sha the --bind-check harvest was verified at (default: git HEAD).
    #[arg(long, value_name = "SHA")]
    pub verified_at_sha: Option<String>,
    /// A file of `<source_key> <bucket>` lines tagging imported records with jurisdiction
    /// A, B, C or D. Blank lines and `#` comments are skipped; `#1194 C` is a map line.
    #[arg(long = "jurisdiction-map", value_name = "PATH")]
    pub jurisdiction_map: Option<String>,
}

/// What a `<kind>:<path>` spec names: the path made absolute against this process's working
/// directory, for evd (or the in-process engine) to read. A spec without a colon is sent as is
/// (evd refuses it, in order).
pub fn source_input(spec: &str) -> SourceInput {
    SourceInput {
        spec: spec.to_string(),
        file: spec.split_once(':').map(|(_, path)| absolute(path)),
        text: None,
        read_error: None,
    }
}

fn map_input(path: &str) -> MapInput {
    MapInput {
        path: path.to_string(),
        file: Some(absolute(path)),
        text: None,
        read_error: None,
    }
}

fn absolute(path: &str) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    cwd.join(path).display().to_string()
}

/// The progress line on a terminal's stderr: rewritten in place, erased before the answer.
struct ProgressLine {
    on: bool,
    shown: bool,
}

impl ProgressLine {
    fn new() -> ProgressLine {
        ProgressLine {
            on: std::io::stderr().is_terminal(),
            shown: false,
        }
    }
    fn show(&mut self, p: &MigrateProgress) {
        if !self.on {
            return;
        }
        let what = match p.phase.as_str() {
            "parse" => "reading sources",
            "plan" => "resolving records",
            "stage" => "staging ticks",
            "write" => "writing ticks",
            other => other,
        };
        let pct = (p.done * 100).checked_div(p.total).unwrap_or(100);
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[Kmigrate: {what} {}/{} ({pct}%)", p.done, p.total);
        let _ = e.flush();
        self.shown = true;
    }
    fn clear(&mut self) {
        if self.shown {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
            self.shown = false;
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Run the backfill stream to its end: progress items, then one answer.
async fn stream_backfill(
    c: Arc<Client>,
    req: BackfillRequest,
) -> Result<Result<BackfillResult, Refusal>, ClientError> {
    let mut sub = c.migrate_backfill(req).await?;
    let mut line = ProgressLine::new();
    while let Some(item) = sub.next().await {
        match item? {
            MigrateEvent::Progress(p) => line.show(&p),
            MigrateEvent::Done(r) => return Ok(Ok(r)),
            MigrateEvent::Refused(r) => return Ok(Err(r.into())),
        }
    }
    Err(ClientError::Custom(
        "evd ended the migrate stream without an answer (the import may or may not have been written; re-running it is safe)".into(),
    ))
}

impl Session {
    /// `migrate`: harvest, reconcile or backfill, first match wins (§8.1).
    pub(crate) async fn migrate(&mut self, a: MigrateArgs) -> Out {
        let json = self.json;
        if let Some(selector) = a.bind_check {
            let ctx = self.context(
                true,
                context::Needs {
                    head: a.verified_at_sha.is_none(),
                    ..context::Needs::default()
                },
            );
            let req = BindCheckRequest {
                context: ctx,
                selector,
                platforms: a.platforms,
                triggered_by: a.triggered_by,
                surfaces: a.surfaces,
                verified_at_sha: a.verified_at_sha,
            };
            let r = self
                .read(
                    |c| {
                        let req = req.clone();
                        async move { c.migrate_bind_check(req).await }
                    },
                    || api::migrate_bind_check(&req),
                )
                .await;
            return self.finish(r, |v| one_line(v, json, shared::bind_check_line(v)));
        }
        if a.reconcile {
            let Some(against) = a.against else {
                return render::refusal(
                    &Refusal::refused(
                        "reconcile_needs_against",
                        "--reconcile requires --against <kind>:<path>",
                    ),
                    json,
                );
            };
            let ctx = self.context(true, context::Needs::default());
            let req = ReconcileRequest {
                context: ctx.clone(),
                against: source_input(&against),
            };
            let r = self
                .read(
                    |c| {
                        let req = req.clone();
                        async move { c.migrate_reconcile(req).await }
                    },
                    || local_read(&ctx, |s| api::migrate_reconcile(s, &req)),
                )
                .await;
            return self.finish(r, |v| one_line(v, json, shared::reconcile_line(v)));
        }
        if a.sources.is_empty() {
            return render::refusal(
                &Refusal::refused(
                    "source_missing",
                    "evctl migrate needs at least one --source <kind>:<path> (or --reconcile / --bind-check)",
                ),
                json,
            );
        }
        let ctx = self.context(true, context::Needs::default());
        let req = BackfillRequest {
            context: ctx.clone(),
            sources: a.sources.iter().map(|s| source_input(s)).collect(),
            jurisdiction_map: a.jurisdiction_map.as_deref().map(map_input),
            blame: a.blame,
            dry_run: a.dry_run,
        };
        let r = self
            .write(
                |c| stream_backfill(c, req.clone()),
                || {
                    local_write(&ctx, |s| {
                        let mut line = ProgressLine::new();
                        api::migrate_backfill(s, &req, &mut |p| line.show(&p)).map(Ok)
                    })
                },
            )
            .await
            .and_then(|inner| inner);
        self.finish(r, |v| {
            let mut out = Out::default();
            out.warnings(&v.warnings);
            if json {
                out.json(v);
            } else {
                out.line(shared::summary_line(v));
            }
            out
        })
    }
}

fn one_line<T: serde::Serialize>(v: &T, json: bool, line: String) -> Out {
    let mut out = Out::default();
    if json {
        out.json(v);
    } else {
        out.line(line);
    }
    out
}
