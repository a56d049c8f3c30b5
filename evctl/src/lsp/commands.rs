//! The server's commands (`workspace/executeCommand`), the code lenses and code actions that
//! offer them, and the thread that runs them. Each command goes through the same verbs and RPCs
//! as the evctl command line:
//!
//! - `ev.check`: `ev.check`, summarised in a message.
//! - `ev.checkRun` `{"tick"?, "platform"?}`: `check --run` for one decision's tests (every
//!   decision's without `tick`), executed here, in the language server's process and
//!   environment (the editor's), never in evd; then a check.
//! - `ev.reverify` `{"tick"?, "platform"?}`: `evctl reverify` for one decision (every one a
//!   commit made stale without `tick`): its missing tests run here, then evd records it verified
//!   at HEAD. Offered as a code action on a file guarded by a decision that reads stale because
//!   a commit touched what it guards.
//! - `ev.verify`: `ev.verify`.
//! - `ev.decide` `{"args": [...]}`: `evctl decide` with exactly these tokens (the decision, then
//!   its flags). `{"triggered_by": [...]}` without `args` opens a draft instead: a small text file
//!   the editor shows, prefilled with `--triggered-by`; saving it with a decision written in
//!   records the decision (a language server cannot prompt for text).
//! - `ev.cite` `{"path", "start", "end"}`: `evctl cite PATH --bytes START-END`: the evidence
//!   marker for those bytes of the file as saved, shown and returned as `{"marker"}`, to put in a
//!   ground's text. The code action "cite … as evidence" offers it for the selection (or the
//!   cursor's line).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use lsp_server::RequestId;
use lsp_types::{CodeActionOrCommand, CodeLens, Command, MessageType, Position, Range};
use proto::rpc::{GuardsResult, Refusal};
use serde_json::{json, Value};

use super::events::{Config, Event};
use crate::grammar::Globals;
use crate::render::{Out, Stream};
use crate::session::Session;
use crate::verbs;

pub const CHECK: &str = "ev.check";
pub const CHECK_RUN: &str = "ev.checkRun";
pub const VERIFY: &str = "ev.verify";
pub const DECIDE: &str = "ev.decide";
pub const CITE: &str = "ev.cite";
pub const REVERIFY: &str = "ev.reverify";
pub const ALL: [&str; 6] = [CHECK, CHECK_RUN, VERIFY, DECIDE, CITE, REVERIFY];

/// Lenses and actions name at most this many decisions of one file.
const MAX_OFFERED: usize = 10;
/// The rows of a check sent back in a command's result, at most.
const MAX_ROWS_TEXT: usize = 64 << 10;

/// A command the loop received, to run here.
pub struct Job {
    pub id: RequestId,
    pub command: String,
    /// The first argument (an object), or `null`.
    pub arg: Value,
}

fn command(title: String, name: &str, arg: Value) -> Command {
    Command {
        title,
        command: name.to_string(),
        arguments: Some(vec![arg]),
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut t: String = s.chars().take(n).collect();
    t.push('…');
    t
}

/// The lenses at the top of a guarded file: one per guarding decision (its verdict; runs its
/// tests), then "check now" and "verify the store".
pub fn lenses(guards: &GuardsResult, rel: &str) -> Vec<CodeLens> {
    let top = Range::new(Position::new(0, 0), Position::new(0, 0));
    let mut out: Vec<CodeLens> = guards
        .decisions
        .iter()
        .filter_map(|d| Some((d, d.worst_ground(Some(rel))?)))
        .take(MAX_OFFERED)
        .map(|(d, g)| CodeLens {
            range: top,
            command: Some(command(
                format!(
                    "ev: {} — {} · run its tests",
                    g.label,
                    clip(&d.decision, 60)
                ),
                CHECK_RUN,
                json!({"tick": d.tick_id}),
            )),
            data: None,
        })
        .collect();
    if out.is_empty() {
        return out;
    }
    out.push(CodeLens {
        range: top,
        command: Some(command("ev: check now".into(), CHECK, json!({}))),
        data: None,
    });
    out.push(CodeLens {
        range: top,
        command: Some(command("ev: verify the store".into(), VERIFY, json!({}))),
        data: None,
    });
    out
}

/// The code actions of any file in the store: cite the selected bytes (`span`, when there is
/// something to cite) as evidence, record a decision about it, run the tests of the decisions
/// guarding it, check, verify.
pub fn actions(
    guards: Option<&GuardsResult>,
    rel: &str,
    span: Option<(u64, u64)>,
) -> Vec<CodeActionOrCommand> {
    let mut out = Vec::new();
    if let Some((start, end)) = span {
        out.push(CodeActionOrCommand::Command(command(
            format!("ev: cite bytes {start}-{end} of {rel} as evidence"),
            CITE,
            json!({"path": rel, "start": start, "end": end}),
        )));
    }
    out.push(CodeActionOrCommand::Command(command(
        format!("ev: record a decision about {rel}…"),
        DECIDE,
        json!({"triggered_by": [rel]}),
    )));
    if let Some(g) = guards {
        for d in g
            .decisions
            .iter()
            .filter(|d| d.worst_ground(Some(rel)).is_some())
            .take(MAX_OFFERED)
        {
            // Stale because a commit touched what it guards: running the tests alone would not
            // clear it.
            let behind = d
                .grounds
                .iter()
                .any(|g| g.label.starts_with("stale") && g.detail.contains("verified_at_sha"));
            if behind {
                out.push(CodeActionOrCommand::Command(command(
                    format!(
                        "ev: re-verify {} at HEAD",
                        proto::json::q(&clip(&d.decision, 60))
                    ),
                    REVERIFY,
                    json!({"tick": d.tick_id}),
                )));
            }
            out.push(CodeActionOrCommand::Command(command(
                format!(
                    "ev: run the tests of {}",
                    proto::json::q(&clip(&d.decision, 60))
                ),
                CHECK_RUN,
                json!({"tick": d.tick_id}),
            )));
        }
    }
    out.push(CodeActionOrCommand::Command(command(
        "ev: check now".into(),
        CHECK,
        json!({}),
    )));
    out.push(CodeActionOrCommand::Command(command(
        "ev: verify the store".into(),
        VERIFY,
        json!({}),
    )));
    out
}

/// Run the command thread: jobs one at a time, drafts looked at between them.
pub fn spawn(
    root: PathBuf,
    config: Config,
    jobs: Receiver<Job>,
    events: Sender<Event>,
    wake: tokio::sync::mpsc::Sender<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("lsp-commands".into())
        .spawn(move || {
            let Some(rt) = super::events::thread_runtime(&events, "commands cannot run") else {
                return;
            };
            let mut runner = Runner {
                root,
                config,
                events,
                drafts: Drafts::new(),
            };
            loop {
                match jobs.recv_timeout(Duration::from_millis(500)) {
                    Ok(job) => {
                        let id = job.id.clone();
                        let moves = moves_verdicts(&job.command);
                        let r = rt.block_on(runner.run(job));
                        // What the command changed is published before its answer: a client
                        // reading both at once (eglot on Emacs 28 drops what follows an answer
                        // in the same read) still sees it, and the answer finds it shown.
                        if moves && r.is_ok() {
                            if let Some(g) = rt.block_on(runner.guards()) {
                                let _ = runner.events.send(Event::Guards(Ok(g)));
                            }
                        }
                        let _ = runner.events.send(Event::Reply(id, r));
                        let _ = wake.try_send(());
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                if rt.block_on(runner.drafts_saved()) {
                    let _ = wake.try_send(());
                }
            }
        })?;
    Ok(())
}

struct Runner {
    root: PathBuf,
    config: Config,
    events: Sender<Event>,
    drafts: Drafts,
}

/// A command's failure: the JSON-RPC error code and message.
type Failed = (i32, String);

fn invalid(msg: impl Into<String>) -> Failed {
    (lsp_server::ErrorCode::InvalidParams as i32, msg.into())
}

fn failed(r: Refusal) -> Failed {
    (lsp_server::ErrorCode::RequestFailed as i32, r.message)
}

/// Both streams of an `Out`.
fn texts(out: &Out) -> (String, String) {
    let (mut o, mut e) = (String::new(), String::new());
    for (stream, text) in &out.parts {
        match stream {
            Stream::Stdout => o.push_str(text),
            Stream::Stderr => e.push_str(text),
        }
    }
    (o, e)
}

fn str_arg(arg: &Value, key: &str) -> Result<Option<String>, Failed> {
    match arg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("{key} must be a string"))),
    }
}

fn strings_arg(arg: &Value, key: &str) -> Result<Option<Vec<String>>, Failed> {
    match arg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid(format!("{key} must be an array of strings")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(invalid(format!("{key} must be an array of strings"))),
    }
}

/// Whether a command writes what verdicts read (a tick, a receipt).
fn moves_verdicts(command: &str) -> bool {
    matches!(command, CHECK_RUN | REVERIFY | DECIDE)
}

impl Runner {
    /// The whole `ev.guards` answer now, as the watch thread asks it (`None` when it fails: the
    /// watch thread's own refresh follows anyway).
    async fn guards(&self) -> Option<std::sync::Arc<proto::rpc::GuardsResult>> {
        let mut s = self.session();
        let req = proto::rpc::GuardsRequest {
            context: crate::verbs::verdict_context(&s, false),
            all_evidence: true,
            ..Default::default()
        };
        crate::verbs::ask_guards(&mut s, req)
            .await
            .ok()
            .map(std::sync::Arc::new)
    }

    fn session(&self) -> Session {
        let mut s = Session::new(&self.globals());
        s.cwd = self.root.clone();
        s
    }

    fn globals(&self) -> Globals {
        Globals {
            store: Some(self.root.display().to_string()),
            plain: true,
            ..Globals::default()
        }
    }

    fn show(&self, kind: MessageType, text: String) {
        let _ = self.events.send(Event::Show(kind, text));
    }

    async fn run(&mut self, job: Job) -> Result<Value, Failed> {
        if !job.arg.is_null() && !job.arg.is_object() {
            return Err(invalid("the argument must be an object"));
        }
        match job.command.as_str() {
            CHECK => self.check(None).await,
            CHECK_RUN => {
                let tick = str_arg(&job.arg, "tick")?;
                let platform =
                    str_arg(&job.arg, "platform")?.unwrap_or_else(|| self.config.platform.clone());
                self.check(Some((tick, platform))).await
            }
            VERIFY => self.verify().await,
            REVERIFY => {
                let tick = str_arg(&job.arg, "tick")?;
                let platform =
                    str_arg(&job.arg, "platform")?.unwrap_or_else(|| self.config.platform.clone());
                self.reverify(tick, platform).await
            }
            CITE => {
                let path = str_arg(&job.arg, "path")?
                    .ok_or_else(|| invalid("path is required (store-relative)"))?;
                let offset = |key: &str| {
                    job.arg
                        .get(key)
                        .and_then(Value::as_u64)
                        .ok_or_else(|| invalid(format!("{key} must be a byte offset")))
                };
                self.cite(path, offset("start")?, offset("end")?)
            }
            DECIDE => match strings_arg(&job.arg, "args")? {
                Some(args) => self.decide(args).await,
                None => {
                    let about = strings_arg(&job.arg, "triggered_by")?.unwrap_or_default();
                    self.draft(about)
                }
            },
            other => Err(invalid(format!("unknown command {other}"))),
        }
    }

    /// `ev.check`, after running tests when `run` says which (`check --run`).
    async fn check(&mut self, run: Option<(Option<String>, String)>) -> Result<Value, Failed> {
        let mut s = self.session();
        let ctx = verbs::verdict_context(&s, false);
        let mut warnings: Vec<String> = Vec::new();
        let mut ran = None;
        if let Some((tick, platform)) = &run {
            let how = verbs::TestRun {
                platform,
                tick: tick.as_deref(),
                detached: true,
                limit: Some(self.config.test_limit),
            };
            let n = verbs::run_tests(&mut s, &ctx, &how, &mut |w| warnings.push(w.to_string()))
                .await
                .map_err(failed)?;
            ran = Some(n);
        }
        let req = proto::rpc::CheckRequest {
            context: ctx.clone(),
            ran: run.is_some(),
            form: proto::rpc::RowForm::PlainFile,
            ..proto::rpc::CheckRequest::default()
        };
        let r = verbs::check_answer(&mut s, &ctx, req)
            .await
            .map_err(failed)?;
        warnings.extend(r.warnings.iter().map(|w| w.message.clone()));
        let rows = r
            .plain
            .as_ref()
            .and_then(|p| p.text().ok())
            .map(|t| clip(&t, MAX_ROWS_TEXT))
            .unwrap_or_default();
        let tally = format!(
            "{} gating · {} green · {} non-gating",
            r.tally.gating, r.tally.green, r.tally.non_gating
        );
        let (kind, mut said) = match (&run, ran) {
            (Some((tick, platform)), Some(0)) => (
                MessageType::WARNING,
                format!(
                    "ev: no test {} declares platform {platform}, so none ran (pass \"platform\", \
                     or set initializationOptions.platform) — {tally}",
                    match tick {
                        Some(t) => format!("of decision {t}"),
                        None => "of the store".to_string(),
                    }
                ),
            ),
            (Some((_, platform)), Some(n)) => (
                if r.gating {
                    MessageType::WARNING
                } else {
                    MessageType::INFO
                },
                format!("ev: ran {n} test(s) here on platform {platform}, then checked — {tally}"),
            ),
            _ => (
                if r.gating {
                    MessageType::WARNING
                } else {
                    MessageType::INFO
                },
                format!("ev check: {tally}"),
            ),
        };
        if let Some(w) = warnings.first() {
            said.push_str(&format!(" ({w})"));
        }
        self.show(kind, said);
        Ok(json!({
            "gating": r.gating,
            "tally": r.tally,
            "ran": ran,
            "rows": rows,
            "warnings": warnings,
        }))
    }

    /// `ev.reverify`: `evctl reverify` for `tick` (all that a commit made stale without it).
    async fn reverify(&mut self, tick: Option<String>, platform: String) -> Result<Value, Failed> {
        let mut s = self.session();
        let how = verbs::How {
            platform: &platform,
            dry_run: false,
            detached: true,
            limit: Some(self.config.test_limit),
        };
        let ids: Vec<String> = tick.into_iter().collect();
        let r = verbs::reverified(&mut s, &ids, &how)
            .await
            .map_err(failed)?;
        use proto::rpc::ReverifyStatus as S;
        let left: Vec<String> = r
            .outcomes
            .iter()
            .filter(|o| matches!(o.status, S::Refused | S::NeedsRun))
            .map(|o| {
                format!(
                    "{}: {}",
                    o.id,
                    o.reason.as_deref().unwrap_or("not re-verified")
                )
            })
            .collect();
        let done = r.outcomes.iter().filter(|o| o.child_id.is_some()).count();
        let (kind, said) = match (done, left.first()) {
            (_, Some(why)) => (
                MessageType::WARNING,
                format!("ev reverify: {done} re-verified at HEAD; not re-verified: {why}"),
            ),
            (0, None) => (
                MessageType::INFO,
                "ev reverify: nothing to re-verify".to_string(),
            ),
            (n, None) => (
                MessageType::INFO,
                format!("ev reverify: {n} decision(s) re-verified at HEAD"),
            ),
        };
        self.show(kind, said);
        serde_json::to_value(&r)
            .map_err(|e| (lsp_server::ErrorCode::InternalError as i32, e.to_string()))
    }

    async fn verify(&mut self) -> Result<Value, Failed> {
        let mut s = self.session();
        let out = verbs::verify(&mut s, false).await;
        let (stdout, stderr) = texts(&out);
        let ok = out.code == 0;
        let said = if ok {
            format!(
                "ev verify: {}",
                stdout.lines().next().unwrap_or("chain intact")
            )
        } else {
            let first = stdout
                .lines()
                .next()
                .or_else(|| stderr.lines().last())
                .unwrap_or("");
            format!(
                "ev verify: {} — {first}",
                stderr.lines().last().unwrap_or("failed")
            )
        };
        self.show(
            if ok {
                MessageType::INFO
            } else {
                MessageType::ERROR
            },
            said,
        );
        Ok(json!({"ok": ok, "stdout": stdout, "stderr": stderr}))
    }

    async fn decide(&mut self, args: Vec<String>) -> Result<Value, Failed> {
        if args.is_empty() {
            return Err(invalid("args must hold the decision, then its flags"));
        }
        let out = verbs::decide(&args, self.globals()).await;
        let (stdout, stderr) = texts(&out);
        let ok = out.code == 0;
        let said = if ok {
            stdout.trim().to_string()
        } else {
            stderr.trim().to_string()
        };
        self.show(
            if ok {
                MessageType::INFO
            } else {
                MessageType::ERROR
            },
            format!("ev decide: {said}"),
        );
        Ok(json!({"ok": ok, "code": out.code, "stdout": stdout, "stderr": stderr}))
    }

    /// `evctl cite PATH --bytes START-END`, from the store's root.
    fn cite(&mut self, path: String, start: u64, end: u64) -> Result<Value, Failed> {
        let s = self.session();
        let args = crate::evidence::CiteArgs {
            target: path,
            bytes: Some(format!("{start}-{end}")),
        };
        match crate::evidence::cite_marker(&s, &args) {
            Ok(c) => {
                let marker = c.marker();
                self.show(
                    MessageType::INFO,
                    format!("ev cite: {marker} — put it in a ground's text to cite these bytes"),
                );
                Ok(
                    json!({"marker": marker, "path": c.path, "start": c.start, "end": c.end, "sha256": c.sha256}),
                )
            }
            Err(r) => {
                self.show(MessageType::ERROR, format!("ev cite: {}", r.message));
                Err(failed(r))
            }
        }
    }

    fn draft(&mut self, about: Vec<String>) -> Result<Value, Failed> {
        let path = self
            .drafts
            .create(&about)
            .map_err(|e| (lsp_server::ErrorCode::RequestFailed as i32, e))?;
        let _ = self.events.send(Event::ShowDocument(path.clone()));
        Ok(json!({"draft": path.display().to_string()}))
    }

    /// Record the drafts saved with a decision in them since the last look. Whether any was.
    async fn drafts_saved(&mut self) -> bool {
        let saved = self.drafts.saved();
        let any = !saved.is_empty();
        for (path, tokens) in saved {
            let tokens = match tokens {
                Ok(t) => t,
                Err(e) => {
                    self.show(
                        MessageType::ERROR,
                        format!("ev decide: {e} — fix the draft and save it again"),
                    );
                    continue;
                }
            };
            let out = verbs::decide(&tokens, self.globals()).await;
            let (stdout, stderr) = texts(&out);
            if out.code == 0 {
                self.drafts.done(&path);
                self.show(
                    MessageType::INFO,
                    format!("ev decide: {} (from the draft)", stdout.trim()),
                );
            } else {
                self.show(
                    MessageType::ERROR,
                    format!(
                        "ev decide: {} — fix the draft and save it again",
                        stderr.trim()
                    ),
                );
            }
        }
        any
    }
}

// ---------------------------------------------------------------------------------------------
// Drafts

/// What stands for the decision in a fresh draft.
pub const PLACEHOLDER: &str = "<the decision, in one line>";
/// Drafts kept at once, and how long one is looked after.
const MAX_DRAFTS: usize = 8;
const DRAFT_LIFE: Duration = Duration::from_secs(3600);

struct Draft {
    path: PathBuf,
    stamp: Option<(SystemTime, u64)>,
    born: Instant,
}

struct Drafts {
    list: Vec<Draft>,
    made: u64,
}

fn stamp(p: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// A draft's text: comments saying what to do, the placeholder, the flags to fill in.
pub fn template(about: &[String]) -> String {
    let mut t = String::from(
        "# A decision for evctl lsp to record. Replace the next line with the decision, fill in\n\
         # the flags you need (a flag left empty is skipped), and save: the decision is recorded\n\
         # then. Flags are read in order, one per line, as `evctl decide --help` describes them.\n\
         # --triggered-by needs a test: --assume-test, --counter-test, --on-platform, --surface.\n",
    );
    t.push_str(PLACEHOLDER);
    t.push_str("\n--observe \n--assume \n--assume-test \n--counter-test \n--on-platform local\n");
    for p in about {
        t.push_str(&format!("--triggered-by {p}\n"));
    }
    t.push_str("--surface \n--reject \n");
    t
}

/// A saved draft as `evctl decide` tokens; `Ok(None)` while no decision is written in.
pub fn draft_tokens(text: &str) -> Result<Option<Vec<String>>, String> {
    let mut decision: Option<String> = None;
    let mut flags = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("--") {
            let (flag, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let value = value.trim();
            if !value.is_empty() {
                flags.push(flag.to_string());
                flags.push(value.to_string());
            }
            continue;
        }
        if decision.is_some() {
            return Err(format!(
                "the draft has a second decision line ({}): one decision per draft, flags start \
                 with --",
                proto::json::q(line)
            ));
        }
        decision = Some(line.to_string());
    }
    match decision {
        None => Ok(None),
        Some(d) if d == PLACEHOLDER => Ok(None),
        Some(d) => Ok(Some(std::iter::once(d).chain(flags).collect())),
    }
}

impl Drafts {
    fn new() -> Drafts {
        Drafts {
            list: Vec::new(),
            made: 0,
        }
    }

    fn create(&mut self, about: &[String]) -> Result<PathBuf, String> {
        self.expire();
        if self.list.len() >= MAX_DRAFTS {
            return Err(format!(
                "{MAX_DRAFTS} drafts are open already: save or close one first"
            ));
        }
        let rt = evd::api::shared::paths::runtime_dir();
        let dir = rt.join("lsp-drafts");
        evd::api::shared::paths::ensure_private_dir(&rt)
            .and_then(|()| evd::api::shared::paths::ensure_private_dir(&dir))
            .map_err(|e| format!("cannot make a draft in {}: {e}", dir.display()))?;
        self.made += 1;
        let path = dir.join(format!("decision-{}-{}.txt", std::process::id(), self.made));
        std::fs::write(&path, template(about))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.list.push(Draft {
            stamp: stamp(&path),
            path: path.clone(),
            born: Instant::now(),
        });
        Ok(path)
    }

    /// Drafts saved since last looked at with a decision written in: their tokens. A draft that
    /// cannot be read as one is reported through its error instead.
    fn saved(&mut self) -> Vec<(PathBuf, Result<Vec<String>, String>)> {
        self.expire();
        let mut out = Vec::new();
        for d in &mut self.list {
            let now = stamp(&d.path);
            if now == d.stamp {
                continue;
            }
            d.stamp = now;
            // A draft larger than any tick could be is not read.
            let text = evd::api::shared::fsio::open_regular(&d.path)
                .ok()
                .and_then(|f| {
                    let mut s = String::new();
                    std::io::Read::read_to_string(
                        &mut std::io::Read::take(f, (1 << 20) + 1),
                        &mut s,
                    )
                    .ok()
                    .filter(|n| *n <= 1 << 20)
                    .map(|_| s)
                });
            let Some(text) = text else { continue };
            match draft_tokens(&text) {
                Ok(None) => {}
                Ok(Some(tokens)) => out.push((d.path.clone(), Ok(tokens))),
                Err(e) => out.push((d.path.clone(), Err(e))),
            }
        }
        out
    }

    fn done(&mut self, path: &Path) {
        self.list.retain(|d| d.path != path);
        let _ = std::fs::remove_file(path);
    }

    fn expire(&mut self) {
        self.list.retain(|d| {
            let keep = d.born.elapsed() < DRAFT_LIFE;
            if !keep {
                let _ = std::fs::remove_file(&d.path);
            }
            keep
        });
    }
}

impl Drop for Drafts {
    fn drop(&mut self) {
        for d in &self.list {
            let _ = std::fs::remove_file(&d.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::diagnostics::tests::{answer, decision, ground};
    use super::*;

    #[test]
    fn a_draft_reads_as_decide_tokens_once_a_decision_is_written_in() {
        let t = template(&["db/schema.sql".into()]);
        assert!(t.contains("--triggered-by db/schema.sql\n"), "{t}");
        assert_eq!(
            draft_tokens(&t),
            Ok(None),
            "the placeholder is not a decision"
        );
        let filled = t
            .replace(PLACEHOLDER, "freeze the schema")
            .replace("--assume \n", "--assume the schema is stable\n")
            .replace("--assume-test \n", "--assume-test true\n");
        assert_eq!(
            draft_tokens(&filled).expect("reads"),
            Some(
                [
                    "freeze the schema",
                    "--assume",
                    "the schema is stable",
                    "--assume-test",
                    "true",
                    "--on-platform",
                    "local",
                    "--triggered-by",
                    "db/schema.sql",
                ]
                .map(String::from)
                .to_vec()
            )
        );
        assert!(draft_tokens("one\ntwo\n").is_err());
        assert_eq!(draft_tokens("# only comments\n\n"), Ok(None));
    }

    #[test]
    fn lenses_and_actions_offer_the_commands_for_the_decisions_guarding_the_file() {
        let r = answer(vec![decision(
            "aaaaaaaaaaaa",
            "freeze the schema",
            vec![ground(0, "red", true, &["db/schema.sql"], None)],
        )]);
        let l = lenses(&r, "db/schema.sql");
        let titles: Vec<&str> = l
            .iter()
            .filter_map(|l| l.command.as_ref().map(|c| c.title.as_str()))
            .collect();
        assert_eq!(
            titles,
            vec![
                "ev: red — freeze the schema · run its tests",
                "ev: check now",
                "ev: verify the store"
            ]
        );
        let run = l[0].command.as_ref().expect("command");
        assert_eq!(run.command, CHECK_RUN);
        assert_eq!(run.arguments, Some(vec![json!({"tick": "aaaaaaaaaaaa"})]));
        assert!(lenses(&r, "README").is_empty());

        let a = actions(Some(&r), "db/schema.sql", None);
        let CodeActionOrCommand::Command(first) = &a[0] else {
            panic!("a command")
        };
        assert_eq!(first.command, DECIDE);
        assert_eq!(
            first.arguments,
            Some(vec![json!({"triggered_by": ["db/schema.sql"]})])
        );
        assert_eq!(a.len(), 4);
        assert_eq!(actions(None, "README", None).len(), 3);
        // With bytes to cite, citing them comes first.
        let a = actions(None, "README", Some((11, 22)));
        let CodeActionOrCommand::Command(cite) = &a[0] else {
            panic!("a command")
        };
        assert_eq!(cite.title, "ev: cite bytes 11-22 of README as evidence");
        assert_eq!(cite.command, CITE);
        assert_eq!(
            cite.arguments,
            Some(vec![json!({"path": "README", "start": 11, "end": 22})])
        );
        assert_eq!(a.len(), 4);
    }
}
