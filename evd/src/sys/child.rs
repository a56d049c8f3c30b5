//! Child processes with a time limit. evd and evctl run git for facts a verb needs; a git that
//! hangs (a `.git/HEAD` that is a FIFO, a dead network filesystem, a stuck lock) must fail the
//! one request that asked, never stall a store's worker or a client for good.
//!
//! The limit is [`git_timeout`]: 10 s, or `EVD_GIT_TIMEOUT_MS`. A process that overruns it is
//! killed; the caller sees [`ChildError::TimedOut`], and the thread that ran it can ask
//! [`take_timeouts`] which commands overran (so a verb can refuse with a clear error rather than
//! answer from a fact it could not learn).

use std::cell::RefCell;
use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// How long a git child may run.
pub fn git_timeout() -> Duration {
    std::env::var("EVD_GIT_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(10))
}

/// Why a child gave no output.
#[derive(Debug)]
pub enum ChildError {
    Spawn(std::io::Error),
    /// It ran past its limit and was killed. Holds the command line, for messages.
    TimedOut(String),
    /// It printed more than the caller takes (the command line, the limit in bytes).
    TooLarge(String, usize),
}

impl std::fmt::Display for ChildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildError::Spawn(e) => write!(f, "cannot run git: {e}"),
            ChildError::TooLarge(cmd, max) => write!(
                f,
                "`{cmd}` answered more than {} MiB and was stopped",
                max / (1024 * 1024)
            ),
            ChildError::TimedOut(cmd) => write!(
                f,
                "`{cmd}` did not finish within {} s and was stopped",
                git_timeout().as_secs_f32()
            ),
        }
    }
}

thread_local! {
    static TIMED_OUT: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Record on this thread commands that overran on another (a worker this thread waited for).
pub fn note_timeouts(commands: Vec<String>) {
    TIMED_OUT.with(|t| t.borrow_mut().extend(commands));
}

/// The commands that overran their limit on this thread since the last call.
pub fn take_timeouts() -> Vec<String> {
    TIMED_OUT.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Run `cmd` (stdin closed, stderr discarded) and collect its stdout, killing it after
/// `limit`.
pub fn output(cmd: &mut Command, limit: Duration) -> Result<Output, ChildError> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(ChildError::Spawn)?;
    let Some(mut stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(ChildError::Spawn(std::io::Error::other("no stdout pipe")));
    };
    // The pipe ends when the child exits (or is killed); a reader thread makes that a channel
    // message, so the wait below needs no polling.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::Builder::new()
        .name("evd-child-out".into())
        .spawn(move || {
            let mut buf = Vec::new();
            let _ = stdout.read_to_end(&mut buf);
            let _ = tx.send(buf);
        })
        .map_err(ChildError::Spawn)?;
    match rx.recv_timeout(limit) {
        Ok(stdout) => {
            let status = child.wait().map_err(ChildError::Spawn)?;
            let _ = reader.join();
            Ok(Output {
                status,
                stdout,
                stderr: Vec::new(),
            })
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            let what = describe(cmd);
            tracing::warn!(command = %what, limit_ms = limit.as_millis() as u64, "a git child overran its time limit and was stopped");
            TIMED_OUT.with(|t| t.borrow_mut().push(what.clone()));
            Err(ChildError::TimedOut(what))
        }
    }
}

/// Run `cmd` with `input` on its stdin (written from a thread of its own, so a child that
/// answers as it reads never deadlocks against us), collecting stdout and stderr, killing it
/// after `limit`, or as soon as it has printed more than `max_out` bytes (an answer that big
/// is refused whole, never kept: [`ChildError::TooLarge`]). For git's batch commands
/// (`cat-file --batch`, `fast-import`) and the network ones evctl runs.
pub fn output_with_input(
    cmd: &mut Command,
    input: Vec<u8>,
    limit: Duration,
    max_out: usize,
) -> Result<Output, ChildError> {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ChildError::Spawn)?;
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(ChildError::Spawn(std::io::Error::other("no pipes")));
    };
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(f)
            .map_err(ChildError::Spawn)
    };
    let writer = spawn(
        "evd-child-in",
        Box::new(move || {
            let _ = stdin.write_all(&input);
        }),
    )?;
    let (etx, erx) = std::sync::mpsc::channel();
    let err_reader = spawn(
        "evd-child-err",
        Box::new(move || {
            let mut buf = Vec::new();
            // Enough to explain a failure; the rest is drained so the child never blocks.
            let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut buf);
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            let _ = etx.send(buf);
        }),
    )?;
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = spawn(
        "evd-child-out",
        Box::new(move || {
            let mut buf = Vec::new();
            let cap = u64::try_from(max_out).unwrap_or(u64::MAX).saturating_add(1);
            let _ = (&mut stdout).take(cap).read_to_end(&mut buf);
            // Past the cap: the answer is refused; stop reading (the child is killed below).
            let _ = tx.send(buf);
        }),
    )?;
    let finish = |child: &mut std::process::Child| {
        let _ = writer.join();
        let _ = reader.join();
        let _ = err_reader.join();
        child.wait()
    };
    match rx.recv_timeout(limit) {
        Ok(stdout) if stdout.len() > max_out => {
            let _ = child.kill();
            let _ = finish(&mut child);
            Err(ChildError::TooLarge(describe(cmd), max_out))
        }
        Ok(stdout) => {
            let stderr = erx.recv_timeout(limit).unwrap_or_default();
            let status = finish(&mut child).map_err(ChildError::Spawn)?;
            Ok(Output {
                status,
                stdout,
                stderr,
            })
        }
        Err(_) => {
            let _ = child.kill();
            let _ = finish(&mut child);
            let what = describe(cmd);
            tracing::warn!(command = %what, limit_ms = limit.as_millis() as u64, "a git child overran its time limit and was stopped");
            TIMED_OUT.with(|t| t.borrow_mut().push(what.clone()));
            Err(ChildError::TimedOut(what))
        }
    }
}

/// [`output`] with the git limit: trimmed stdout when git succeeded and printed something.
pub fn git_stdout(cmd: &mut Command) -> Option<String> {
    let out = output(cmd, git_timeout()).ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_overruns_is_stopped_and_reported() {
        let started = std::time::Instant::now();
        let mut c = Command::new("sleep");
        c.arg("30");
        let r = output(&mut c, Duration::from_millis(200));
        assert!(matches!(r, Err(ChildError::TimedOut(_))), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(take_timeouts(), vec!["sleep 30".to_string()]);
        assert!(take_timeouts().is_empty());
    }

    #[test]
    fn a_child_that_says_too_much_is_stopped_and_its_answer_refused() {
        // It would go on for a minute (its deadline) and then sleep half of another: refused
        // long before either, however loaded the machine is.
        let mut c = Command::new("sh");
        c.args(["-c", "head -c 100000 /dev/zero; exec sleep 30"]);
        let started = std::time::Instant::now();
        let r = output_with_input(&mut c, Vec::new(), Duration::from_secs(60), 1000);
        assert!(matches!(r, Err(ChildError::TooLarge(_, 1000))), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(25));
        let mut c = Command::new("cat");
        let out =
            output_with_input(&mut c, b"fed".to_vec(), Duration::from_secs(5), 1000).expect("ran");
        assert_eq!(out.stdout, b"fed");
    }

    #[test]
    fn a_child_within_its_limit_gives_its_output() {
        let mut c = Command::new("echo");
        c.arg("hello");
        let out = output(&mut c, Duration::from_secs(10)).expect("ran");
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    }
}
