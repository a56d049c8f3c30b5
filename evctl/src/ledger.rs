//! `evctl ledger …`: the store's event ledger (`results/ledger/events.jsonl`), whose only
//! writer is evd: append events through it, verify the whole file, ask it seed 002's questions,
//! replay it.

use std::io::Read;
use std::path::PathBuf;

use proto::rpc::{LedgerAppendRequest, LedgerVerifyResult, Refusal, StoreRequest};

use crate::context::Needs;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, local_write, Session};

/// The most event text one `append` sends (a request is at most 1 MiB on the socket).
const MAX_INPUT: usize = 960 * 1024;

#[derive(clap::Subcommand, Debug)]
pub enum LedgerAction {
    /// Append events, one JSON object per line, from FILE (or standard input).
    ///
    /// Each event carries seed 002's envelope: schema_version ("1.1", or "1.0", upgraded),
    /// event_type, run_id, agent_id and payload; host and git are filled in by evd when
    /// absent; seq, ts and prev are evd's and must not be given. The events are checked
    /// against the ledger and each other (the consistency rules R1–R9) and written all
    /// together or not at all: a refusal names the event and the rule.
    ///
    /// Example:
    ///   printf '%s\n' '{"schema_version":"1.1","event_type":"intent_created","run_id":"R-1",
    ///     "agent_id":"planner","payload":{"intent_id":"I-1","parent_intent_id":null,"goal":"g"}}' |
    ///     evctl ledger append
    #[command(verbatim_doc_comment)]
    Append {
        /// A file of events, one per line (default, or `-`: standard input).
        file: Option<PathBuf>,
    },
    /// Answer one of seed 002's questions over the ledger.
    ///
    ///   calibration   predicted vs actual p_success per agent and model (last N executions)
    ///   reliability   executions by predicted p_success in tenths, with the actual success
    ///   routing       routing ROI by model tier: success rate, cost, impact, impact per cost
    ///   failures      the most frequent failure modes (executions, rebases, merges)
    ///   entropy       mean predicted vs actual entropy by entropy estimator version
    ///   conflicts     rebase conflict rates by repository area
    ///   decisions     how often each decision resurfaced, and mean time from red to resolved
    ///   history       each decision's verdict changes, in order
    ///
    /// --all-hosts asks the fleet: this host's ledger and every other host's that a `git fetch`
    /// brought and `ledger verify --all-hosts` accepts (they are judged first; a refused copy
    /// is left out and named on stderr). Each host's plans are joined to its own executions.
    ///
    /// --json gives the rows as objects.
    #[command(verbatim_doc_comment)]
    Query {
        /// The question (see above).
        #[arg(value_parser = ["calibration", "reliability", "routing", "failures", "entropy", "conflicts", "decisions", "history"])]
        name: String,
        /// calibration: each group's latest N executions.
        #[arg(long, value_name = "N", default_value_t = 50)]
        last: usize,
        /// Every host's ledger fetched and accepted, with this one's.
        #[arg(long)]
        all_hosts: bool,
    },
    /// Verify the whole ledger: order, the hash chain, every envelope and rule.
    ///
    /// Exit 1 on the first line that breaks a rule, named with the rule; the fault is also
    /// reported as a `ledger_validation_error` event appended to the ledger (history itself
    /// is never changed). There is no lenient mode.
    ///
    /// --all-hosts also verifies every other host's ledger a `git fetch` brought (see `ledger
    /// publish`): each must extend, byte for byte, the copy last accepted from that host, keep
    /// every rule, and hold every event another host witnessed of it. A rewritten or broken
    /// one is refused, naming the host and the first line at fault (exit 1); the last good
    /// copy is kept. Each copy accepted is witnessed: its last event is journaled here
    /// (`ledger_witnessed`), and so anchored in every host that fetches this one's ledger.
    /// This host's own ledger fetched back, and what others witnessed of it, must match the
    /// file here.
    #[command(verbatim_doc_comment)]
    Verify {
        /// Every host's ledger a fetch brought, too.
        #[arg(long)]
        all_hosts: bool,
    },
    /// Publish this host's ledger to a remote as refs/evolving/ledger/<host>, never forced.
    ///
    /// Each host publishes to a ref of its own (host id: EV_HOST_ID, else this machine's name),
    /// so there is nothing to merge; other clones set up with `evctl remote setup` fetch every
    /// host's with `git fetch`, and `evctl ledger verify --all-hosts` checks them. A published
    /// ledger is only ever extended.
    Publish {
        /// The remote (default: the current branch's remote, else `origin`, else the only one).
        #[arg(long, value_name = "REMOTE")]
        remote: Option<String>,
    },
    /// Replay the ledger: verify it, then fold what every check rested on (the receipts, the
    /// current ticks, read from the store by id, git's answers, the clock it read) through the
    /// verdict engine, and compare each `check_run`'s fingerprint with the one recorded.
    ///
    /// Exit 1 at the first check whose verdicts do not come out the same, naming its line and
    /// seq. Uses no clock, locale or network. There is no lenient mode.
    Replay,
    /// Make the ledger appendable again after a crash or an edit cut its end, saying so in it.
    ///
    /// A torn last line (cut short mid-write) is moved aside, whole, under
    /// `results/runs/<evd's run id>/`, never appended after and never deleted; when lines were
    /// removed from the end (the file ends before the head evd keeps beside it), the seqs they
    /// held are declared skipped, so none is ever used twice. Each repair is journaled as a
    /// `ledger_correction` event naming what was done. Nothing else is changed; a ledger that
    /// needs no repair is left as it is.
    Repair,
}

pub async fn run(s: &mut Session, action: LedgerAction) -> Out {
    match action {
        LedgerAction::Append { file } => append(s, file).await,
        LedgerAction::Verify { all_hosts } => {
            let mut out = verify(s).await;
            if all_hosts {
                hosts(s, &mut out, true).await;
            }
            out
        }
        LedgerAction::Publish { remote } => publish(s, remote).await,
        LedgerAction::Replay => replay(s).await,
        LedgerAction::Repair => repair(s).await,
        LedgerAction::Query {
            name,
            last,
            all_hosts,
        } => {
            let mut out = Out::default();
            let host = if all_hosts {
                match evd::api::shared::users::host_id() {
                    Ok((h, _)) => {
                        // The fleet's copies judged first: only accepted ones are folded in.
                        hosts(s, &mut out, false).await;
                        h
                    }
                    Err(e) => return render::refusal(&Refusal::refused("host_id", e), s.json),
                }
            } else {
                String::new()
            };
            let q = query(s, name, last, all_hosts, host).await;
            out.code = out.code.max(q.code);
            out.parts.extend(q.parts);
            out
        }
    }
}

/// The events of `text`: one JSON value per non-blank line.
fn parse_events(text: &str) -> Result<Vec<serde_json::Value>, Refusal> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                Refusal::refused(
                    "ledger_input",
                    format!("line {} of the events is not JSON: {e}", i + 1),
                )
            })
        })
        .collect()
}

fn read_input(file: Option<PathBuf>) -> Result<String, Refusal> {
    let mut bytes = Vec::new();
    let limit = MAX_INPUT as u64 + 1;
    let r = match file.as_deref() {
        None => std::io::stdin().take(limit).read_to_end(&mut bytes),
        Some(p) if p.as_os_str() == "-" => std::io::stdin().take(limit).read_to_end(&mut bytes),
        Some(p) => std::fs::File::open(p).and_then(|f| f.take(limit).read_to_end(&mut bytes)),
    };
    r.map_err(|e| Refusal::io(format!("reading the events: {e}")))?;
    if bytes.len() > MAX_INPUT {
        return Err(Refusal::refused(
            "ledger_input",
            format!(
                "more than {} KiB of events in one append: split them",
                MAX_INPUT / 1024
            ),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| Refusal::refused("ledger_input", "the events are not UTF-8"))
}

async fn append(s: &mut Session, file: Option<PathBuf>) -> Out {
    let events = match read_input(file).and_then(|t| parse_events(&t)) {
        Ok(e) => e,
        Err(e) => return render::refusal(&e, s.json),
    };
    let ctx = s.context(true, Needs::default());
    let req = LedgerAppendRequest {
        context: ctx.clone(),
        events,
    };
    let r = s
        .write(rpc!(req, ledger_append), || {
            local_write(&ctx, |st| evd::api::ledger_append(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| {
        let mut out = Out::default();
        if json {
            out.json(v);
        } else {
            let n = v.lines.len() as u64;
            let last = v.first_seq + n.saturating_sub(1);
            if n == 1 {
                out.line(format!("appended 1 event, seq {last}"));
            } else {
                out.line(format!("appended {n} events, seq {}–{last}", v.first_seq));
            }
        }
        out
    })
}

async fn verify(s: &mut Session) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let r = s
        .read(rpc!(req, ledger_verify), || {
            local_write(&ctx, |st| evd::api::ledger_verify(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| render_verify(v, json))
}

fn render_verify(v: &LedgerVerifyResult, json: bool) -> Out {
    let mut out = Out::default();
    match &v.fault {
        None => {
            if json {
                out.json(v);
            } else {
                let n = match v.lines {
                    1 => "1 event".to_string(),
                    n => format!("{n} events"),
                };
                out.line(format!("ledger ok: {n} in {}", v.path));
            }
        }
        Some(f) => {
            out.code = 1;
            if json {
                out.json(v);
            } else {
                out.err(format!(
                    "evctl: the ledger is broken at line {} ({}): {}",
                    f.line, f.rule, f.message
                ));
                if let Some(seq) = v.reported_seq {
                    out.err(format!("reported as ledger_validation_error, seq {seq}"));
                }
            }
        }
    }
    out
}

async fn repair(s: &mut Session) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let r = s
        .write(rpc!(req, ledger_repair), || {
            local_write(&ctx, |st| evd::api::ledger_repair(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| {
        let mut out = Out::default();
        if json {
            out.json(v);
            return out;
        }
        if v.repaired.is_empty() {
            out.line(format!("ledger needs no repair: {}", v.path));
            return out;
        }
        for (seq, p) in (v.first_seq.unwrap_or_default()..).zip(&v.repaired) {
            let line = match p["kind"].as_str().unwrap_or_default() {
                "torn_tail_moved" => format!(
                    "moved a torn last line ({} bytes) aside to results/{}",
                    p["bytes"],
                    p["artifacts"][0]["path"].as_str().unwrap_or_default()
                ),
                "lines_removed" => format!(
                    "lines removed from the end cannot be restored here: seq {}–{} declared skipped",
                    p["from_seq"], p["to_seq"]
                ),
                other => format!("repaired: {other}"),
            };
            out.line(format!("{line} (ledger_correction, seq {seq})"));
        }
        out
    })
}

async fn replay(s: &mut Session) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let r = s
        .read(rpc!(req, ledger_replay), || {
            local_write(&ctx, |st| evd::api::ledger_replay(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| {
        let mut out = Out::default();
        if v.fault.is_some() {
            out.code = 1;
        }
        if json {
            out.json(v);
            return out;
        }
        match &v.fault {
            None => out.line(format!(
                "replay ok: {} check run(s) reproduced from {} event(s) ({} tick read(s) from the store)",
                v.replayed, v.lines, v.ticks_read
            )),
            Some(f) => out.err(format!(
                "evctl: the replay parts from the ledger at line {} ({}): {}",
                f.line, f.rule, f.message
            )),
        }
        out
    })
}

/// The columns a query's rows are shown with, in order.
fn columns(query: &str) -> &'static [&'static str] {
    match query {
        "calibration" => &[
            "agent_id",
            "model_id",
            "executions",
            "predicted_p_success",
            "actual_p_success",
            "mean_abs_error",
        ],
        "routing" => &[
            "tier",
            "executions",
            "success_rate",
            "cost",
            "impact",
            "impact_per_cost",
        ],
        "failures" => &["count", "kind", "reason"],
        "entropy" => &[
            "estimator_version",
            "executions",
            "predicted_entropy",
            "actual_entropy",
        ],
        "conflicts" => &["area", "conflicted_rebases", "rate"],
        "reliability" => &[
            "agent_id",
            "model_id",
            "bin",
            "executions",
            "predicted_p_success",
            "actual_p_success",
        ],
        "history" => &["ts", "tick_id", "ground_index", "old", "new"],
        _ => &[
            "tick_id",
            "resurfaced",
            "resolved",
            "mean_secs_red_to_resolved",
            "open_red",
            "label",
        ],
    }
}

async fn query(s: &mut Session, name: String, last: usize, all_hosts: bool, host: String) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = proto::rpc::LedgerQueryRequest {
        context: ctx.clone(),
        query: name.clone(),
        last: Some(last),
        all_hosts,
        host,
        queries: Vec::new(),
    };
    let r = s
        .read(rpc!(req, ledger_query), || {
            local_read(&ctx, |st| evd::api::ledger_query(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| {
        let mut out = Out::default();
        if json {
            out.json(v);
            return out;
        }
        let cols = columns(&name);
        if let Some(hosts) = v["hosts"].as_array() {
            let named: Vec<String> = hosts
                .iter()
                .map(|h| {
                    format!(
                        "{} ({} events)",
                        h["host"].as_str().unwrap_or("?"),
                        h["events"]
                    )
                })
                .collect();
            out.line(format!("over {} hosts: {}", hosts.len(), named.join(", ")));
        }
        let rows = v["rows"].as_array().cloned().unwrap_or_default();
        if rows.is_empty() {
            out.line(format!("{name}: nothing in the ledger answers this yet"));
            return out;
        }
        let cell = |r: &serde_json::Value, c: &str| match &r[c] {
            serde_json::Value::String(t) => t.clone(),
            serde_json::Value::Null => "-".to_string(),
            other => other.to_string(),
        };
        let widths: Vec<usize> = cols
            .iter()
            .map(|c| {
                rows.iter()
                    .map(|r| cell(r, c).chars().count())
                    .chain([c.len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<String>| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        out.line(line(cols.iter().map(|c| c.to_string()).collect()));
        for r in &rows {
            out.line(line(cols.iter().map(|c| cell(r, c)).collect()));
        }
        out
    })
}

/// `ledger verify --all-hosts`: every other host's fetched ledger, after this host's own
/// (`report`: each host's verdict said; otherwise only the refused ones, on stderr).
async fn hosts(s: &mut Session, out: &mut Out, report: bool) {
    let host = evd::api::shared::users::host_id()
        .map(|(h, _)| h)
        .unwrap_or_default();
    let ctx = s.context(true, Needs::default());
    let req = proto::rpc::LedgerHostsRequest {
        context: ctx.clone(),
        host,
    };
    let r = s
        .write(rpc!(req, ledger_hosts), || {
            local_write(&ctx, |st| evd::api::ledger_hosts(st, &req))
        })
        .await;
    let v = match r {
        Ok(v) => v,
        Err(e) => {
            let refused = render::refusal(&e, s.json);
            out.code = out.code.max(refused.code);
            out.parts.extend(refused.parts);
            return;
        }
    };
    if s.json && report {
        out.json(&v);
    }
    for h in &v.hosts {
        if h.state != "ok" && report {
            out.code = 1;
        }
        if s.json && report {
            continue;
        }
        if h.state == "ok" && report {
            out.line(format!(
                "host {} ok: {} events (from {})",
                h.host, h.events, h.remote
            ));
        } else if h.state != "ok" {
            out.err(format!("evctl: {} (from {})", h.message, h.remote));
        }
    }
    if v.hosts.is_empty() && !s.json && report {
        out.line("no other host's ledger fetched yet (`evctl remote setup`, then `git fetch`)");
    }
}

/// `ledger publish`: write the host's ref through evd, then push it (never forced).
async fn publish(s: &mut Session, remote: Option<String>) -> Out {
    let json = s.json;
    let root = s.root(true);
    let (remote, host, by) = match crate::team::publisher(&root, remote) {
        Ok(p) => p,
        Err(e) => return render::refusal(&e, json),
    };
    let ctx = s.context(true, Needs::default());
    let req = proto::rpc::LedgerPublishRequest {
        context: ctx.clone(),
        host: host.clone(),
        by,
    };
    let r = s
        .write(rpc!(req, ledger_publish), || {
            local_write(&ctx, |st| evd::api::ledger_publish(st, &req))
        })
        .await;
    let r = match r {
        Ok(r) => r,
        Err(e) => return render::refusal(&e, json),
    };
    let spec = format!("{0}:{0}", r.ledger_ref);
    match crate::team::git_run(
        &root,
        &["push", "--porcelain", "--no-verify", &remote, &spec],
        crate::team::network_timeout(),
    ) {
        Ok((true, _, _)) => {}
        Ok((false, pushed, err)) => {
            let said = pushed
                .lines()
                .find(|l| l.starts_with('!'))
                .map_or(err, |l| l.trim().to_string());
            return render::refusal(
                &Refusal::io(format!(
                    "git push {remote} {} was refused: {said} (a host's published ledger is only ever extended: is another machine publishing as {host}?)",
                    r.ledger_ref
                )),
                json,
            );
        }
        Err(e) => return render::refusal(&Refusal::io(e), json),
    }
    let mut out = Out::default();
    if json {
        out.json(&r);
    } else {
        out.line(format!(
            "published the ledger of {host} ({} events) to {remote}: {} is at {}",
            r.events,
            r.ledger_ref,
            r.commit.get(..12).unwrap_or(&r.commit)
        ));
    }
    out
}
