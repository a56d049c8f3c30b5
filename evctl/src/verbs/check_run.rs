//! `check --run`: run each planned binding's test (and counter-test) here, in the caller's
//! process and environment (never in evd), tee their output while keeping it for the ledger,
//! stop one that outlives its limit, and hand each receipt to evd.
//!
//! It must not judge verdicts (evd's engine does, from the receipts) nor print anything but the
//! tests' own output and the warnings it is handed a sink for.

use std::path::{Path, PathBuf};

use evd::api::{self, shared};
use proto::rpc::{Refusal, StoreRequest};

use crate::context;
use crate::rpc;
use crate::session::{local_read, local_write, Session};

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
