//! One handler per verb: resolve what the caller knows, ask the session (daemon or in-process),
//! render the answer.

use std::path::{Path, PathBuf};

use evd::api::{self, shared, shared::paths};
use proto::rpc::{
    DecideRequest, FromGit, GuardRequest, IdRequest, ListForm, ListRequest, Overturn,
    PendingRequest, ProposeRequest, RatifyRequest, Refusal, StoreRequest, SupersedeMode,
    SupersedeRequest, VerifyRequest,
};

use crate::client;
use crate::context::{self, Needs};
use crate::grammar::{self, Globals, Walk};
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{call_error, local_read, local_write, Session};
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

/// `guard`'s fixed flag set (upstream's, flag for flag).
#[derive(clap::Args, Debug)]
pub struct GuardArgs {
    /// The test that passes while the claim holds.
    #[arg(allow_hyphen_values = true)]
    pub selector: String,
    /// HEAD's id (guard only amends the current HEAD).
    pub id: String,
    /// The ground: its claim, or its zero-based index among all grounds.
    pub target: Option<String>,
    /// The test that flips red if the claim breaks.
    #[arg(long, allow_hyphen_values = true)]
    pub counter_test: String,
    /// Where the test must keep running (repeatable, at least one).
    #[arg(long = "on-platform", value_name = "P")]
    pub platforms: Vec<String>,
    /// A path whose change makes the last run stale (repeatable, at least one).
    #[arg(long = "triggered-by", value_name = "PATH")]
    pub triggered_by: Vec<String>,
    /// What the test guards (repeatable, at least one).
    #[arg(long = "surface", value_name = "S")]
    pub surfaces: Vec<String>,
    /// The commit the test was verified at (default: git HEAD).
    #[arg(long, value_name = "SHA")]
    pub verified_at_sha: Option<String>,
    /// Who is on the hook (default: git config user.name).
    #[arg(long)]
    pub blame: Option<String>,
    /// user-ruled | agent-disposable (the child's only; not inherited).
    #[arg(long)]
    pub authority: Option<String>,
}

pub async fn guard(s: &mut Session, a: GuardArgs) -> Out {
    let ctx = s.context(
        true,
        Needs {
            user_name: a.blame.is_none(),
            head: a.verified_at_sha.is_none(),
            upstream: false,
        },
    );
    let req = GuardRequest {
        context: ctx.clone(),
        selector: a.selector,
        id: a.id,
        target: a.target,
        counter_test: a.counter_test,
        platforms: a.platforms,
        triggered_by: a.triggered_by,
        surfaces: a.surfaces,
        verified_at_sha: a.verified_at_sha,
        blame: a.blame,
        authority: a.authority,
    };
    let r = s
        .write(rpc!(req, guard), || {
            local_write(&ctx, |st| api::guard(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| render::guard(v, json))
}

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
    client::wait_daemon_gone(&rt).await;
    let mut out = Out::default();
    if g.json {
        out.json(&serde_json::json!({"stopped": true, "pid": pid}));
    } else {
        out.line(format!("stopped evd pid {pid}"));
    }
    out
}

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

/// The outcome of running one selector with `sh -c` in `root`.
enum Ran {
    Result(bool),
    CouldNot(String),
}

/// A test's run as the ledger records it (`tool_call`).
fn tool_run(command: &str, role: &str, c: Captured) -> proto::rpc::ToolRun {
    proto::rpc::ToolRun {
        command: command.to_string(),
        role: role.to_string(),
        exit_code: c.exit_code,
        stdout: String::from_utf8_lossy(&c.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&c.stderr).into_owned(),
        duration_ms: c.duration_ms,
    }
}

/// What a test printed, kept for the ledger as it was shown (at most [`KEEP_OUTPUT`] bytes of
/// each stream), and how it ended.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The exit code (`None`: killed by a signal, or never started).
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
}

/// The most of each stream of a test kept for the ledger's artifacts.
const KEEP_OUTPUT: usize = 64 * 1024;
/// How long a test's output is still forwarded after it exits (something it started in the
/// background may hold its streams open): past that, its run is recorded as it stands.
const OUTPUT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Copy `from` to `to` as it comes, keeping its first [`KEEP_OUTPUT`] bytes.
fn tee(
    mut from: impl std::io::Read + Send + 'static,
    to: fn() -> Box<dyn std::io::Write>,
) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = buf.get(..n).unwrap_or_default();
                    let mut out = to();
                    let _ = out.write_all(chunk);
                    let _ = out.flush();
                    let room = KEEP_OUTPUT.saturating_sub(kept.len());
                    kept.extend_from_slice(chunk.get(..n.min(room)).unwrap_or_default());
                }
            }
        }
        let _ = tx.send(kept);
    });
    rx
}

/// How `check --run` runs the bound tests: always in the caller's process and environment (never
/// in evd). `evctl check --run` runs every planned binding declaring the platform, with the
/// terminal's stdin and stdout; the language server runs one decision's, off its protocol streams
/// and with a time limit.
pub struct TestRun<'a> {
    /// The platform the receipts speak for: only bindings declaring it run.
    pub platform: &'a str,
    /// Only this tick's bindings (`None`: every planned one).
    pub tick: Option<&'a str>,
    /// Keep the tests off this process's stdin and stdout (stdin closed, their stdout sent to
    /// our stderr): the language server's stdio is its protocol.
    pub detached: bool,
    /// Stop a test (and everything it started) that runs longer than this.
    pub limit: Option<std::time::Duration>,
}

impl TestRun<'_> {
    /// [`TestRun::sh`], the run kept in `runs` for the ledger.
    fn sh_kept(
        &self,
        root: &Path,
        selector: &str,
        role: &str,
        green: i32,
        runs: &mut Vec<proto::rpc::ToolRun>,
    ) -> Ran {
        let mut captured = Captured::default();
        let r = self.sh(root, selector, green, &mut captured);
        runs.push(tool_run(selector, role, captured));
        r
    }

    fn sh(&self, root: &Path, selector: &str, green: i32, captured: &mut Captured) -> Ran {
        use std::io::Write;
        if !self.detached {
            // Our output so far before the test's own (a detached caller's stdout is not ours).
            let _ = std::io::stdout().flush();
        }
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c").arg(selector).current_dir(root);
        if self.detached {
            cmd.stdin(std::process::Stdio::null());
        }
        // The test's output goes where it always went (our stdout, or our stderr when detached)
        // as it comes, and is kept for the ledger too.
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let to_stdout: fn() -> Box<dyn std::io::Write> = if self.detached {
            || Box::new(std::io::stderr())
        } else {
            || Box::new(std::io::stdout())
        };
        let started = std::time::Instant::now();
        let status = spawn_limited(&mut cmd, self.limit).map(|(mut child, status)| {
            let out = child.stdout.take().map(|o| tee(o, to_stdout));
            let err = child
                .stderr
                .take()
                .map(|e| tee(e, || Box::new(std::io::stderr())));
            let st = status(child);
            let until = std::time::Instant::now() + OUTPUT_GRACE;
            let left = || until.saturating_duration_since(std::time::Instant::now());
            captured.stdout = out
                .and_then(|r| r.recv_timeout(left()).ok())
                .unwrap_or_default();
            captured.stderr = err
                .and_then(|r| r.recv_timeout(left()).ok())
                .unwrap_or_default();
            st
        });
        let status = status.and_then(|st| st);
        captured.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        captured.exit_code = status.as_ref().ok().and_then(|s| s.code());
        match status {
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Ran::CouldNot(format!(
                "{} ran longer than {} s and was stopped",
                proto::json::q(selector),
                self.limit.map_or(0, |l| l.as_secs())
            )),
            Err(e) => Ran::CouldNot(format!("cannot run {}: {e}", proto::json::q(selector))),
            Ok(st) => match st.code() {
                Some(c @ (126 | 127)) => Ran::CouldNot(format!(
                    "{} could not be executed (exit {c})",
                    proto::json::q(selector)
                )),
                Some(c) => Ran::Result(c == green),
                None => Ran::Result(false),
            },
        }
    }
}

/// What waits for a spawned test: its exit status (or `TimedOut`).
type Waiter = Box<dyn FnOnce(std::process::Child) -> std::io::Result<std::process::ExitStatus>>;

/// Spawn `cmd`; the waiter returned waits for it, within `limit` when there is one (see
/// [`wait_limited`]).
fn spawn_limited(
    cmd: &mut std::process::Command,
    limit: Option<std::time::Duration>,
) -> std::io::Result<(std::process::Child, Waiter)> {
    use std::os::unix::process::CommandExt;
    match limit {
        None => {
            let child = cmd.spawn()?;
            Ok((child, Box::new(|mut c: std::process::Child| c.wait())))
        }
        Some(limit) => {
            cmd.process_group(0);
            let child = cmd.spawn()?;
            Ok((child, Box::new(move |c| wait_limited(c, limit))))
        }
    }
}

/// Wait for `child`, which runs in a process group of its own, killing the whole group when it
/// outlives `limit` (a test's `sh -c` may have started others). Overrunning is an
/// `ErrorKind::TimedOut` error.
fn wait_limited(
    mut child: std::process::Child,
    limit: std::time::Duration,
) -> std::io::Result<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        if std::time::Instant::now() >= deadline {
            // The group's id is the child's pid (process_group(0)).
            if let Ok(pgid) = i32::try_from(child.id()) {
                evd::api::shared::process::kill_group(pgid);
            }
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the test ran past its limit",
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

/// `check --run`: execute, in this process and environment, the planned bindings `how` selects,
/// and hand each receipt to evd. Failures are reported through `warn`; they never fail the call.
/// Returns how many bindings ran.
pub async fn run_tests(
    s: &mut Session,
    ctx: &proto::rpc::Context,
    how: &TestRun<'_>,
    warn: &mut dyn FnMut(&str),
) -> Result<usize, Refusal> {
    use proto::rpc::{AppendReceiptsRequest, NewReceipt};
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let plan = s
        .read(rpc!(req, check_plan), || {
            local_read(ctx, |st| api::check_plan(st, &req))
        })
        .await?;
    let root = PathBuf::from(&ctx.store);
    let mut ran = 0;
    for p in plan
        .runs
        .iter()
        .filter(|p| how.tick.is_none_or(|t| p.tick_id == t))
        .filter(|p| p.platforms.iter().any(|x| x == how.platform))
    {
        let qref = proto::json::q(&p.reference);
        let Some(commit) = context::git(&root, &["rev-parse", "HEAD"]) else {
            warn(&format!("warning: run failed for {qref}: cannot resolve verified_at_sha (not a git repo?) — pass --verified-at-sha"));
            continue;
        };
        let mut runs = Vec::new();
        let check = how.sh_kept(
            &root,
            &p.reference,
            "check",
            plan.green_exit_code,
            &mut runs,
        );
        let green = match check {
            Ran::Result(g) => g,
            Ran::CouldNot(e) => {
                warn(&format!("warning: run failed for {qref}: {e}"));
                continue;
            }
        };
        ran += 1;
        let falsifiable = match &p.counter_test {
            None => None,
            Some(ct) => {
                match how.sh_kept(&root, ct, "counter-test", plan.green_exit_code, &mut runs) {
                    Ran::Result(cg) => {
                        if cg == green {
                            // A negative control that agrees with the check proves nothing.
                            warn(&format!(
                            "warning: counter-test {} did not flip (it agreed with the check) — not a valid negative control; recording unproven",
                            proto::json::q(ct)
                        ));
                        }
                        Some(green != cg)
                    }
                    Ran::CouldNot(e) => {
                        warn(&format!(
                            "warning: counter-test {} could not run ({e}) — recording unproven",
                            proto::json::q(ct)
                        ));
                        Some(false)
                    }
                }
            }
        };
        let areq = AppendReceiptsRequest {
            context: ctx.clone(),
            receipts: vec![NewReceipt {
                test: p.reference.clone(),
                platform: how.platform.to_string(),
                commit,
                result: if green { "green" } else { "red" }.into(),
                falsifiable,
            }],
            run_id: Some(shared::run_id().to_string()),
            runs,
        };
        match s
            .write(rpc!(areq, receipts_append), || {
                local_write(ctx, |st| api::receipts_append(st, &areq))
            })
            .await
        {
            Ok(r) => r.warnings.iter().for_each(|w| warn(&w.message)),
            Err(e) => warn(&format!(
                "warning: could not write receipt for {qref}: {}",
                e.message
            )),
        }
    }
    Ok(ran)
}

/// The context a verdict read needs: the git fact the store's staleness policy reads (HEAD for
/// `local-head`, the upstream for `live-origin`; none offline).
pub fn verdict_context(s: &Session, offline: bool) -> proto::rpc::Context {
    let root = s.root(true);
    let policy = evd::api::shared::config::Config::parse(
        std::fs::read_to_string(root.join(".evolving").join("config"))
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

/// The current decisions guarding `paths` (store-relative; `None`: every guarded path), with
/// check's verdicts: from evd, or in-process.
pub async fn guards_of(
    s: &mut Session,
    paths: Option<Vec<String>>,
) -> Result<proto::rpc::GuardsResult, Refusal> {
    let req = proto::rpc::GuardsRequest {
        context: verdict_context(s, false),
        paths,
        ..Default::default()
    };
    ask_guards(s, req).await
}

/// Ask `ev.guards` as given (its context built with [`verdict_context`]): from evd, or
/// in-process.
pub async fn ask_guards(
    s: &mut Session,
    req: proto::rpc::GuardsRequest,
) -> Result<proto::rpc::GuardsResult, Refusal> {
    let ctx = req.context.clone();
    s.read(rpc!(req, guards), || {
        local_read(&ctx, |st| api::guards(st, &req))
    })
    .await
}

/// `guards [PATH]…`: which current decisions guard these files (every guarded file without
/// paths), each with the verdict that speaks for it.
pub async fn guards(s: &mut Session, paths: Vec<String>) -> Out {
    let root = s.root(true);
    let mut rel = Vec::with_capacity(paths.len());
    for p in &paths {
        match context::store_relative(&root, &s.cwd, p) {
            Ok(r) => rel.push(r),
            Err(e) => return render::refusal(&Refusal::refused("path_outside_store", e), s.json),
        }
    }
    let r = guards_of(s, (!paths.is_empty()).then_some(rel)).await;
    let json = s.json;
    s.finish(r, |v| render::guards(v, json))
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

/// An answer file evd wrote for us, opened: only a regular file in our own runtime directory's
/// `answers/`, of the announced length. Once open, it reads whole even if evd lets it go.
fn open_answer(rt_dir: &Path, file: &proto::rpc::AnswerRef) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = Path::new(&file.path);
    if path.parent()? != rt_dir.join("answers") {
        return None;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    (m.is_file() && m.len() == file.len).then_some(f)
}

/// An answer file evd wrote for us: only one in our own runtime directory's `answers/`, read
/// whole, of the announced length.
fn read_answer(rt_dir: &Path, file: &proto::rpc::AnswerRef) -> Option<String> {
    let path = Path::new(&file.path);
    if path.parent()? != rt_dir.join("answers") {
        return None;
    }
    let text = evd::api::shared::fsio::read_text(path).ok()?;
    (text.len() as u64 == file.len).then_some(text)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_answer_file_from_our_own_runtime_directory_is_read() {
        let rt = tempfile::tempdir().expect("tempdir");
        let answers = rt.path().join("answers");
        std::fs::create_dir(&answers).expect("mkdir");
        let file = answers.join("1-0.txt");
        std::fs::write(&file, "green\tx\n").expect("write");
        let at = |path: &Path, len: u64| proto::rpc::AnswerRef {
            path: path.display().to_string(),
            len,
        };
        assert_eq!(
            read_answer(rt.path(), &at(&file, 8)).as_deref(),
            Some("green\tx\n")
        );
        assert_eq!(
            read_answer(rt.path(), &at(&file, 9)),
            None,
            "torn or changed"
        );
        assert_eq!(
            read_answer(rt.path(), &at(&answers.join("gone.txt"), 0)),
            None
        );
        let elsewhere = rt.path().join("1-0.txt");
        std::fs::write(&elsewhere, "x").expect("write");
        assert_eq!(
            read_answer(rt.path(), &at(&elsewhere, 1)),
            None,
            "not in answers/"
        );
    }
}
