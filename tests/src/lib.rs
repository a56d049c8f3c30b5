//! The end-to-end harness: real binaries, a private runtime directory per test (so every test
//! gets its own evd), real git repositories, and upstream `ev` 0.1.32 as the oracle.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use tempfile::TempDir;

pub mod bench_lsp;
pub mod console;
pub mod fuzz;
pub mod lsp_client;
pub mod soak;
pub mod store_gen;

/// The directory the test binaries were built into (target/<profile>).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

/// Path of a workspace binary (`evd`, `evctl`, …), built by `cargo test --workspace`: beside
/// the running executable (a program such as evbench in target/<profile>), else in the
/// directory above it (a test in target/<profile>/deps).
pub fn bin(name: &str) -> PathBuf {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file());
    let p = beside.unwrap_or_else(|| target_dir().join(name));
    assert!(
        p.is_file(),
        "{} is missing: run `cargo test --workspace` (or `cargo build --workspace`) first",
        p.display()
    );
    p
}

/// The repository root (for scripts and the upstream oracle under target/).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Upstream `ev` 0.1.27, the oracle for byte compatibility: `$EV_UPSTREAM`, else
/// `target/upstream/bin/ev` (where `scripts/test` installs it), else `ev` on PATH.
pub fn upstream_ev() -> PathBuf {
    let candidates = std::env::var_os("EV_UPSTREAM")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::iter::once(
            workspace_root().join("target/upstream/bin/ev"),
        ))
        .chain(
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("ev"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        );
    for c in candidates {
        if let Ok(out) = Command::new(&c).arg("--version").output() {
            if String::from_utf8_lossy(&out.stdout).trim() == "ev 0.1.32" {
                return c;
            }
        }
    }
    panic!(
        "upstream ev 0.1.32 is required as the compatibility oracle: run `scripts/test`, or \
         `cargo install evolving --version 0.1.32 --locked --root target/upstream`"
    );
}

/// Upstream's verbs, as it names them in its hints and refusals (`run \`ev init\` first`).
const UPSTREAM_VERBS: [&str; 17] = [
    "init",
    "setup",
    "show",
    "list",
    "log",
    "brief",
    "verify",
    "decide",
    "propose",
    "guard",
    "check",
    "migrate",
    "supersede",
    "ratify",
    "pending",
    "why",
    "reopen",
];

/// Where upstream names itself without one of its verbs after the name: the words around
/// `ev`, and evctl's.
const UPSTREAM_SELF_MENTIONS: [(&str, &str); 2] = [
    // The co-location note after `check --run`.
    (
        "— ev reads git state from this directory",
        "— evctl reads git state from this directory",
    ),
    (
        "run ev in the working tree",
        "run evctl in the working tree",
    ),
];

/// `text` as evctl would say it: evctl names the program the user ran, so every `ev <verb>`
/// in upstream's words (the word `ev` standing alone, then one of its verbs) reads
/// `evctl <verb>`, as do the few sentences that name `ev` otherwise
/// ([`UPSTREAM_SELF_MENTIONS`]). Everything else is left byte for byte.
pub fn as_said_by_evctl(text: &str) -> String {
    let mut text = verbs_as_said_by_evctl(text);
    for (theirs, ours) in UPSTREAM_SELF_MENTIONS {
        if text.contains(theirs) {
            text = text.replace(theirs, ours);
        }
    }
    text
}

fn verbs_as_said_by_evctl(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(at) = rest.find("ev ") {
        let before = if at > 0 {
            rest[..at].chars().last()
        } else {
            out.chars().last()
        };
        let standalone = before.is_none_or(|c| !(c.is_alphanumeric() || "_-./:".contains(c)));
        let after = &rest[at + 3..];
        let names_verb = UPSTREAM_VERBS.iter().any(|v| {
            after.strip_prefix(v).is_some_and(|tail| {
                tail.chars()
                    .next()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'))
            })
        });
        out.push_str(&rest[..at]);
        out.push_str(if standalone && names_verb {
            "evctl "
        } else {
            "ev "
        });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A finished command: exit code and both streams as text.
#[derive(Debug, Clone)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Upstream's answer with its program-name mentions as evctl makes them.
    fn from_upstream(o: Output) -> Run {
        let r = Run::from(o);
        Run {
            stdout: as_said_by_evctl(&r.stdout),
            stderr: as_said_by_evctl(&r.stderr),
            ..r
        }
    }
    /// Panic with both streams unless the exit code is 0.
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "command failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// One private world: its own runtime directory (so its own evd), its own HOME.
pub struct World {
    pub rt: TempDir,
    pub home: TempDir,
    /// Extra environment every command of this world gets (and so the evd it starts).
    pub env: Vec<(String, String)>,
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

impl World {
    pub fn new() -> World {
        let rt = tempfile::Builder::new()
            .prefix("evrt")
            .tempdir()
            .expect("runtime tempdir");
        std::fs::set_permissions(rt.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod runtime dir");
        let home = tempfile::tempdir().expect("home tempdir");
        World {
            rt,
            home,
            env: Vec::new(),
        }
    }

    /// A world whose commands (and so its daemon) all run with `env` added.
    pub fn with_env(env: &[(&str, &str)]) -> World {
        let mut w = World::new();
        w.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        w
    }

    /// This world's daemon status (`evctl status --json`), if one answers.
    pub fn status(&self) -> Option<serde_json::Value> {
        let r = self.evctl(self.home.path(), &["status", "--json"]);
        if r.code != 0 {
            return None;
        }
        serde_json::from_str(r.stdout.trim()).ok()
    }

    /// The evd runtime directory of this world.
    pub fn rt_dir(&self) -> PathBuf {
        self.rt.path().join("evd")
    }

    pub fn socket(&self) -> PathBuf {
        self.rt_dir().join("evd.sock")
    }

    /// A command with this world's environment (and none of the caller's evd settings).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("XDG_RUNTIME_DIR", self.rt.path())
            .env("HOME", self.home.path())
            .env("EVD_BIN", bin("evd"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("EVD_RUNTIME_DIR")
            .env_remove("EVD_NO_DAEMON")
            .env_remove("EV_AGENT_ID")
            .env_remove("NO_COLOR")
            .env_remove("GIT_DIR")
            .env_remove("EVD_NO_WATCH")
            .env_remove("EVD_STORE_IDLE_SECS")
            .env_remove("EVD_MAX_OPEN_STORES")
            .stdin(Stdio::null());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// `git args…` in `dir` with this world's environment (so the hooks it runs reach this
    /// world's evd) and the built evctl on PATH, hooks not turned off, plus `env`.
    pub fn git_env(&self, dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
        let mut c = self.command("git");
        c.current_dir(dir)
            .args(args)
            .env("PATH", path_with_evctl())
            .env_remove("EVCTL_NO_HOOKS");
        for (k, v) in env {
            c.env(k, v);
        }
        Run::from(c.output().expect("git"))
    }

    /// [`World::git_env`] without extra environment.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Run {
        self.git_env(dir, &[], args)
    }

    /// Run evctl in `cwd`.
    pub fn evctl<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Run {
        let out = self
            .command(bin("evctl"))
            .current_dir(cwd)
            .args(args)
            .output()
            .expect("run evctl");
        Run::from(out)
    }

    /// Run evctl with extra environment variables.
    pub fn evctl_env<S: AsRef<OsStr>>(&self, cwd: &Path, env: &[(&str, &str)], args: &[S]) -> Run {
        let mut c = self.command(bin("evctl"));
        c.current_dir(cwd).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        Run::from(c.output().expect("run evctl"))
    }

    /// [`World::evctl`], stopped (SIGKILL) after `limit`: `None` when it did not finish by then,
    /// so that a hang fails the test that caused it instead of the whole suite.
    pub fn evctl_within<S: AsRef<OsStr>>(
        &self,
        cwd: &Path,
        args: &[S],
        limit: Duration,
    ) -> Option<Run> {
        let out = tempfile::tempdir().expect("tempdir");
        let (o, e) = (out.path().join("out"), out.path().join("err"));
        let mut child = self
            .command(bin("evctl"))
            .current_dir(cwd)
            .args(args)
            .stdout(std::fs::File::create(&o).expect("stdout file"))
            .stderr(std::fs::File::create(&e).expect("stderr file"))
            .spawn()
            .expect("spawn evctl");
        let deadline = std::time::Instant::now() + limit;
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break Some(st);
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }?;
        Some(Run {
            code: status.code().unwrap_or(-1),
            stdout: std::fs::read_to_string(&o).unwrap_or_default(),
            stderr: std::fs::read_to_string(&e).unwrap_or_default(),
        })
    }

    /// Run upstream ev in `cwd`. Its output comes back with every `ev <verb>` it names read as
    /// `evctl <verb>` ([`as_said_by_evctl`]), the one difference evctl makes on purpose, so that
    /// it compares byte for byte with evctl's.
    pub fn ev<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Run {
        let out = self
            .command(upstream_ev())
            .current_dir(cwd)
            .args(args)
            .output()
            .expect("run ev");
        Run::from_upstream(out)
    }

    /// Run upstream ev with extra environment variables (its output read as [`World::ev`]'s).
    pub fn ev_env<S: AsRef<OsStr>>(&self, cwd: &Path, env: &[(&str, &str)], args: &[S]) -> Run {
        let mut c = self.command(upstream_ev());
        c.current_dir(cwd).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        Run::from_upstream(c.output().expect("run ev"))
    }

    /// The pid of this world's running evd, if one answers.
    pub fn daemon_pid(&self) -> Option<u32> {
        let r = self.evctl(self.home.path(), &["status", "--json"]);
        if r.code != 0 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).ok()?;
        v["pid"].as_u64().and_then(|p| u32::try_from(p).ok())
    }

    /// The pid the daemon lock names, when that process is alive (needs no socket round trip,
    /// so it works even when a loaded machine makes the daemon slow to answer).
    pub fn lock_holder_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.rt_dir().join("evd.lock")).ok()?;
        let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
        let pid = u32::try_from(v["pid"].as_u64()?).ok()?;
        pid_alive(pid).then_some(pid)
    }

    /// Stop this world's daemon (if any) and wait until its process is gone.
    pub fn stop_daemon(&self) {
        let pid = self.daemon_pid().or_else(|| self.lock_holder_pid());
        let _ = self.evctl(self.home.path(), &["shutdown"]);
        if let Some(pid) = pid {
            if !wait_until(Duration::from_secs(5), || !pid_alive(pid)) {
                // SAFETY: sending a signal has no memory-safety preconditions.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
                wait_until(Duration::from_secs(5), || !pid_alive(pid));
            }
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon_pid() {
            let _ = self.evctl(self.home.path(), &["shutdown"]);
            if !wait_until(Duration::from_secs(3), || !pid_alive(pid)) {
                // SAFETY: sending a signal has no memory-safety preconditions.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// Whether a process exists (and is not a zombie we could reap).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Poll `cond` until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `PATH` with the directory of the built evctl first.
pub fn path_with_evctl() -> String {
    format!(
        "{}:{}",
        target_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `git args…` in `dir` (no system configuration, its stdout dropped); panics unless it
/// succeeds. evctl's hooks step aside (`EVCTL_NO_HOOKS`): this git has no test world's
/// environment, so a hook's evctl would reach (or start) a daemon in the default runtime
/// directory, outside the test. A test that means a hook to run uses [`World::git`].
pub fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("EVCTL_NO_HOOKS", "1")
        .stdout(Stdio::null())
        .status()
        .expect("git");
    assert!(st.success(), "git {args:?}");
}

/// `git add -A` then `git commit -q -m <message>` in `dir`.
pub fn commit_all(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
}

/// The editors' and the report's store: `db/schema.sql` committed, a store, and the decision
/// "freeze the schema" whose ground "the schema is stable" is bound to `test ! -e broken`
/// (counter-test `test -e broken`) on platform `local`, triggered by `db/schema.sql`, with the
/// road not taken "pgvector: it locks the schema". `before_decide` runs between `init` and the
/// decision (a config edit, say). Returns the decision's id.
pub fn schema_decision(w: &World, p: &Path, before_decide: impl FnOnce()) -> String {
    std::fs::create_dir_all(p.join("db")).expect("mkdir");
    std::fs::write(p.join("db/schema.sql"), "create table t(x int);\n").expect("write");
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "schema"]);
    w.evctl(p, &["init"]).ok();
    before_decide();
    let r = w
        .evctl(
            p,
            &[
                "decide",
                "freeze the schema",
                "--assume",
                "the schema is stable",
                "--assume-test",
                "test ! -e broken",
                "--counter-test",
                "test -e broken",
                "--on-platform",
                "local",
                "--triggered-by",
                "db/schema.sql",
                "--surface",
                "ddl",
                "--reject",
                "pgvector: it locks the schema",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok();
    r.stdout
        .split_whitespace()
        .nth(1)
        .expect("the recorded id")
        .to_string()
}

/// `evctl decide <text>` with one reason, blamed on a person, in `dir`: the recorded tick's id.
pub fn decide_one(w: &World, dir: &Path, text: &str) -> String {
    let r = w
        .evctl(
            dir,
            &["decide", text, "--assume", "a reason", "--blame", "Wang Yu"],
        )
        .ok();
    recorded_id(&r.stdout)
}

/// The tick id a write verb printed: the second word of `recorded <id> …`.
pub fn recorded_id(stdout: &str) -> String {
    stdout
        .split_whitespace()
        .nth(1)
        .expect("recorded <id>")
        .to_string()
}

/// A repository holding `db/schema.sql` and `api/routes.rs`, committed, with a store made by
/// `evctl init` (run with `env`): the code the guard tests put their decisions on.
pub fn code_repo(w: &World, env: &[(&str, &str)]) -> Repo {
    let repo = Repo::new();
    let p = repo.path();
    std::fs::create_dir_all(p.join("db")).expect("mkdir");
    std::fs::create_dir_all(p.join("api")).expect("mkdir");
    std::fs::write(p.join("db/schema.sql"), "create table t(x int);\n").expect("write");
    std::fs::write(p.join("api/routes.rs"), "fn main() {}\n").expect("write");
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "code"]);
    w.evctl_env(p, env, &["init"]).ok();
    repo
}

/// A temporary git repository with a fixed identity and one commit.
pub struct Repo {
    pub dir: TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        let dir = tempfile::Builder::new()
            .prefix("evrepo")
            .tempdir()
            .expect("repo tempdir");
        let git = |args: &[&str]| {
            let st = Command::new("git")
                .current_dir(dir.path())
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("git");
            assert!(st.success(), "git {args:?} failed");
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["config", "user.name", "Repo Owner"]);
        git(&["config", "user.email", "owner@example.invalid"]);
        std::fs::write(dir.path().join("README"), "x\n").expect("write");
        git(&["add", "README"]);
        git(&["commit", "-q", "-m", "first"]);
        Repo { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn ev_dir(&self) -> PathBuf {
        self.path().join(".evolving")
    }

    /// `git rev-parse HEAD`.
    pub fn head(&self) -> String {
        let out = Command::new("git")
            .current_dir(self.path())
            .args(["rev-parse", "HEAD"])
            .output()
            .expect("git rev-parse");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Every tick file name, sorted.
    pub fn tick_files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.ev_dir().join("ticks"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    pub fn head_file(&self) -> String {
        std::fs::read_to_string(self.ev_dir().join("HEAD")).unwrap_or_default()
    }
}

impl Default for Repo {
    fn default() -> Self {
        Self::new()
    }
}

/// Replace the `held_since` value in a tick file's text (the one field that differs by time).
pub fn without_held_since(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("\"held_since\":") {
                "  \"held_since\": \"<t>\",".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Walk `parent_id` from HEAD; returns the chain HEAD-first. Panics on a broken chain.
pub fn chain(repo: &Repo) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = repo.head_file().trim().to_string();
    while !cur.is_empty() {
        let text = std::fs::read_to_string(repo.ev_dir().join("ticks").join(&cur))
            .unwrap_or_else(|e| panic!("tick {cur} missing from the chain: {e}"));
        let v: serde_json::Value = serde_json::from_str(&text).expect("tick is JSON");
        out.push(cur);
        cur = v["parent_id"].as_str().unwrap_or("").to_string();
        assert!(out.len() < 1_000_000, "cycle");
    }
    out
}

/// Generate a realistic, upstream-compatible store of `ticks` ticks in `dir` (made a git
/// repository with a short history when it has none), pinned to [`store_gen::FIXED_NOW`]: the same
/// `ticks` and `seed` give the same bytes. See [`store_gen`] for what it contains. Panics with the
/// reason when it cannot.
pub fn gen_store(dir: &Path, ticks: usize, seed: u64) -> store_gen::Summary {
    let opts = store_gen::Options {
        ticks,
        seed,
        ..store_gen::Options::default()
    };
    store_gen::generate(dir, &opts).unwrap_or_else(|e| panic!("{e}"))
}

/// One JSON-RPC call over HTTP on the daemon's socket (a fresh connection, closed after):
/// the whole response object (`result` or `error`).
pub fn rpc_post(sock: &Path, method: &str, params: serde_json::Value) -> serde_json::Value {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        .to_string();
    rpc_post_raw(sock, &body)
}

/// POST `body` as it is (a JSON-RPC request, or not) and parse the JSON answer.
pub fn rpc_post_raw(sock: &Path, body: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).expect("connect to evd");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let req = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let (_, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"))
}

/// A WebSocket upgrade on evd's socket, answered with 101, then left without a subscription
/// (an idle client, as the connection tests and the pressure bench make them).
pub fn idle_websocket(sock: &Path) -> Option<std::os::unix::net::UnixStream> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).ok()?;
    String::from_utf8_lossy(&buf[..n])
        .starts_with("HTTP/1.1 101")
        .then_some(s)
}

/// A running `evctl watch --json` in a store, its lines read by a thread of its own.
pub struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    pub fn start(w: &World, dir: &Path) -> Watch {
        let mut child = w
            .command(bin("evctl"))
            .current_dir(dir)
            .args(["watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("evctl watch");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watch { child, lines }
    }

    /// The next pushed change whose new label is `label` (bounded wait).
    pub fn expect(&self, label: &str) -> serde_json::Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
                if v["kind"] == "changed" && v["new"] == label {
                    return v;
                }
            }
        }
        panic!("no pushed change to {label}");
    }

    /// Every pushed change until one of each of `wanted` was seen (bounded wait): the first
    /// change each predicate accepts, in the order of `wanted`.
    pub fn expect_all(
        &self,
        wanted: &[&dyn Fn(&serde_json::Value) -> bool],
    ) -> Vec<serde_json::Value> {
        let mut found: Vec<Option<serde_json::Value>> = vec![None; wanted.len()];
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while found.iter().any(Option::is_none) && std::time::Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
                if v["kind"] != "changed" {
                    continue;
                }
                if let Some(i) = (0..wanted.len()).find(|&i| found[i].is_none() && wanted[i](&v)) {
                    found[i] = Some(v);
                }
            }
        }
        found
            .into_iter()
            .enumerate()
            .map(|(i, v)| v.unwrap_or_else(|| panic!("no pushed change matched wanted[{i}]")))
            .collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::as_said_by_evctl;

    #[test]
    fn only_upstreams_name_before_one_of_its_verbs_is_rewritten() {
        for (upstream, ours) in [
            (
                "error: no .evolving/ store here — run `ev init` first\n",
                "error: no .evolving/ store here — run `evctl init` first\n",
            ),
            (
                "ev ratify requires a non-empty --blame",
                "evctl ratify requires a non-empty --blame",
            ),
            (
                "tip: ev why <selector> · ev reopen <id>",
                "tip: evctl why <selector> · evctl reopen <id>",
            ),
            ("`ev list` for all", "`evctl list` for all"),
            (
                "ev setup: '/x' is not a git working tree",
                "evctl setup: '/x' is not a git working tree",
            ),
            (
                "(all stale / not-run / unproven) — ev reads git state from this directory; if \
                 the ledger is separate from the guarded code, run ev in the working tree, or set \
                 staleness_ref = local-head\n",
                "(all stale / not-run / unproven) — evctl reads git state from this directory; \
                 if the ledger is separate from the guarded code, run evctl in the working tree, \
                 or set staleness_ref = local-head\n",
            ),
        ] {
            assert_eq!(as_said_by_evctl(upstream), ours);
        }
        for kept in [
            "prev list",
            "dev init",
            "ev listing",
            "ev correct 0123456789ab",
            "ev  init",
            "the ev-brief contract",
            "./ev init",
            "ev",
        ] {
            assert_eq!(as_said_by_evctl(kept), kept);
        }
    }
}
