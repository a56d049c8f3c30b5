//! `evbench lsp`: how long `evctl lsp` takes to update an editor's diagnostics, with no request
//! from the editor, after another process appends a receipt or makes a commit touching a trigger.
//!
//! On a 10,000-tick generated store, served by a private evd, `evctl lsp` is driven over stdio
//! by [`crate::lsp_client::LspClient`]. One decision guarding `db/schema.sql` is picked; each
//! round commits a change to that file (its last run turns stale) and then appends a fresh green
//! receipt at the new HEAD (green again), each written straight to the store by this process. The
//! time measured runs from just before the write (or the `git commit`'s start) to the arrival of
//! the `textDocument/publishDiagnostics` for that file.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::lsp_client::{diagnostics_for, file_uri, LspClient};
use crate::store_gen;

type Res<T> = Result<T, String>;

/// Rounds of each kind.
const ROUNDS: usize = 20;
/// How long one update may take before the round counts as missed.
const LIMIT: Duration = Duration::from_secs(10);
/// The file the rounds touch (one of the generator's trigger paths).
const TRIGGER: &str = "db/schema.sql";

struct Env {
    xdg: tempfile::TempDir,
    home: tempfile::TempDir,
    evd: PathBuf,
    evctl: PathBuf,
}

impl Env {
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env("XDG_RUNTIME_DIR", self.xdg.path())
            .env("HOME", self.home.path())
            .env("EVD_BIN", &self.evd)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("EVD_RUNTIME_DIR")
            .env_remove("EVD_NO_DAEMON")
            .env_remove("EVD_NO_WATCH")
            .env_remove("EV_AGENT_ID")
            .stdin(Stdio::null());
        c
    }

    fn evctl(&self, cwd: &Path, args: &[&str]) -> Res<String> {
        let out = self
            .command(&self.evctl)
            .current_dir(cwd)
            .args(args)
            .output()
            .map_err(|e| format!("evctl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "evctl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn git(dir: &Path, args: &[&str]) -> Res<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A ground to flip: its decision's tick id, selector and one of its platforms.
struct Target {
    tick: String,
    selector: String,
    platform: String,
}

fn pick_target(env: &Env, root: &Path) -> Res<Target> {
    let out = env.evctl(root, &["--json", "guards", TRIGGER])?;
    let v: Value = serde_json::from_str(out.trim()).map_err(|e| format!("guards --json: {e}"))?;
    let decisions = v["decisions"].as_array().cloned().unwrap_or_default();
    for d in &decisions {
        // A decision guarding the file through exactly one test ground: its diagnostic follows
        // that ground.
        let grounds: Vec<&Value> = d["grounds"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter(|g| {
                        g["triggered_by"]
                            .as_array()
                            .is_some_and(|t| t.iter().any(|t| t == TRIGGER))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let [g] = grounds.as_slice() else { continue };
        let platforms = g["platforms"].as_array().cloned().unwrap_or_default();
        if platforms.len() != 1 || g["counter_test"].is_null() {
            continue;
        }
        return Ok(Target {
            tick: d["tick_id"].as_str().unwrap_or_default().to_string(),
            selector: g["selector"].as_str().unwrap_or_default().to_string(),
            platform: platforms[0].as_str().unwrap_or_default().to_string(),
        });
    }
    Err(format!(
        "no decision guarding {TRIGGER} through one single-platform test ground ({} guard it)",
        decisions.len()
    ))
}

fn append_receipt(root: &Path, t: &Target, commit: &str, result: &str) -> Res<()> {
    let line = json!({
        "commit": commit,
        "falsifiable": true,
        "platform": t.platform,
        "ran_at": evd::engine::clock::now_rfc3339(),
        "result": result,
        "test": t.selector,
    });
    let path = root
        .join(".evolving/results/receipts")
        .join(format!("{}.jsonl", proto::id::receipt_key(&t.selector)));
    let mut f = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("append: {e}"))
}

/// The label the target's diagnostic shows in `v` (a publishDiagnostics for the trigger).
fn label_in(v: &Value, uri: &str, tick: &str) -> Option<String> {
    let d = diagnostics_for(v, uri)?
        .iter()
        .find(|d| d["code"] == tick)?;
    let m = d["message"].as_str()?;
    let after = m.split(" reads ").nth(1)?;
    Some(
        after
            .split(" — ")
            .next()?
            .trim_end_matches(" (gating)")
            .to_string(),
    )
}

/// Wait for the target's diagnostic to read `want` (a label prefix); the time from `from`.
fn wait_label(
    c: &mut LspClient,
    uri: &str,
    tick: &str,
    want: &str,
    from: Instant,
) -> Option<Duration> {
    let (at, _) = c.wait_for_at(LIMIT, |v| {
        label_in(v, uri, tick).is_some_and(|l| l.starts_with(want))
    })?;
    Some(at.saturating_duration_since(from))
}

/// `evctl watch --json`, each pushed line with when it arrived: evd's own share of a round.
struct Watch {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Instant>,
}

impl Watch {
    fn start(env: &Env, root: &Path) -> Res<Watch> {
        use std::io::BufRead;
        let mut child = env
            .command(&env.evctl)
            .current_dir(root)
            .args(["watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("evctl watch: {e}"))?;
        let out = child.stdout.take().ok_or("evctl watch: no stdout")?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(Instant::now()).is_err() {
                    break;
                }
            }
        });
        Ok(Watch { child, lines })
    }

    /// When the first change pushed after `from` arrived, relative to `from`.
    fn first_after(&self, from: Instant) -> Option<Duration> {
        let end = Instant::now() + Duration::from_secs(2);
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            let at = self.lines.recv_timeout(left).ok()?;
            if at >= from {
                return Some(at - from);
            }
        }
    }

    fn drain(&self) {
        while self.lines.try_recv().is_ok() {}
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn summary(what: &str, mut v: Vec<Duration>, missed: usize) {
    v.sort();
    let pick = |p: f64| -> String {
        if v.is_empty() {
            return "-".into();
        }
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        format!("{:.1} ms", v[i.min(v.len() - 1)].as_secs_f64() * 1000.0)
    };
    let within = v
        .iter()
        .filter(|d| **d <= Duration::from_millis(300))
        .count();
    println!(
        "  {what:<44} n={:<3} median {:>9}  p90 {:>9}  max {:>9}  within 300 ms: {within}/{}{}",
        v.len(),
        pick(0.5),
        pick(0.9),
        pick(1.0),
        v.len() + missed,
        if missed > 0 {
            format!(
                "  ({missed} missed: no update within {} s)",
                LIMIT.as_secs()
            )
        } else {
            String::new()
        }
    );
}

/// Run the section with these binaries.
pub fn run(evd: &Path, evctl: &Path) -> Res<()> {
    println!("\nlsp: diagnostics update latency of `evctl lsp` (10,000-tick store)");
    let xdg = tempfile::Builder::new()
        .prefix("evbench-lsp-rt")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    fs::set_permissions(xdg.path(), fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("chmod: {e}"))?;
    let env = Env {
        xdg,
        home: tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?,
        evd: evd.to_path_buf(),
        evctl: evctl.to_path_buf(),
    };
    let store = tempfile::Builder::new()
        .prefix("evbench-lsp-store")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    let t = Instant::now();
    let opts = store_gen::Options {
        ticks: 10_000,
        seed: 2,
        ..store_gen::Options::default()
    };
    store_gen::generate(store.path(), &opts)?;
    let root = fs::canonicalize(store.path()).map_err(|e| format!("canonicalize: {e}"))?;
    println!("  store generated in {:.1} s", t.elapsed().as_secs_f64());
    git(&root, &["config", "user.name", "evbench"])?;
    git(&root, &["config", "user.email", "evbench@example.invalid"])?;
    // Warm the daemon: it opens the store and evaluates it once.
    env.evctl(&root, &["check"])?;
    let target = pick_target(&env, &root)?;
    let uri = file_uri(&root.join(TRIGGER));

    let mut cmd = env.command(evctl);
    cmd.arg("lsp").current_dir(&root).stderr(Stdio::null());
    let t = Instant::now();
    let mut c = LspClient::spawn(cmd).map_err(|e| format!("evctl lsp: {e}"))?;
    c.initialize(&root, json!({}), json!({}))
        .ok_or("evctl lsp did not answer initialize")?;
    let first = c
        .wait_for(Duration::from_secs(60), |v| {
            diagnostics_for(v, &uri).is_some()
        })
        .ok_or("no diagnostics for the trigger file within 60 s")?;
    let shown = diagnostics_for(&first, &uri).map_or(0, Vec::len);
    println!(
        "  first diagnostics {:.0} ms after start; {TRIGGER} carries {shown} (one per decision guarding it)",
        t.elapsed().as_secs_f64() * 1000.0
    );
    println!(
        "  target: decision {} (selector {:?}, platform {})",
        target.tick, target.selector, target.platform
    );
    // Make the target green at HEAD to start from.
    append_receipt(
        &root,
        &target,
        &git(&root, &["rev-parse", "HEAD"])?,
        "green",
    )?;
    if wait_label(&mut c, &uri, &target.tick, "green", Instant::now()).is_none() {
        return Err("the target never read green after a green receipt".into());
    }

    let watch = Watch::start(&env, &root)?;
    std::thread::sleep(Duration::from_millis(300));
    let (mut pushed_commits, mut pushed_receipts) = (Vec::new(), Vec::new());
    let (mut commits, mut receipts) = (Vec::new(), Vec::new());
    let (mut commits_missed, mut receipts_missed) = (0, 0);
    for round in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis(150));
        c.drain();
        watch.drain();
        fs::write(
            root.join(TRIGGER),
            format!("-- round {round}\ncreate table t(x int);\n"),
        )
        .map_err(|e| format!("write: {e}"))?;
        git(&root, &["add", TRIGGER])?;
        let from = Instant::now();
        git(&root, &["commit", "-q", "-m", &format!("round {round}")])?;
        match wait_label(&mut c, &uri, &target.tick, "stale", from) {
            Some(d) => commits.push(d),
            None => commits_missed += 1,
        }
        pushed_commits.extend(watch.first_after(from));
        std::thread::sleep(Duration::from_millis(150));
        c.drain();
        watch.drain();
        let head = git(&root, &["rev-parse", "HEAD"])?;
        let from = Instant::now();
        append_receipt(&root, &target, &head, "green")?;
        match wait_label(&mut c, &uri, &target.tick, "green", from) {
            Some(d) => receipts.push(d),
            None => receipts_missed += 1,
        }
        pushed_receipts.extend(watch.first_after(from));
    }
    println!("  the editor's diagnostics (evctl lsp, publishDiagnostics received):");
    summary(
        "commit touching the trigger → stale",
        commits,
        commits_missed,
    );
    summary(
        "receipt appended by another process → green",
        receipts,
        receipts_missed,
    );
    println!("  evd's own push of the first change (evctl watch, same rounds), for comparison:");
    summary("commit touching the trigger", pushed_commits, 0);
    summary("receipt appended by another process", pushed_receipts, 0);
    let _ = c.call("shutdown", Value::Null, Duration::from_secs(5));
    c.notify("exit", Value::Null);
    let _ = c.exited(Duration::from_secs(5));
    let _ = env.evctl(env.home.path(), &["shutdown"]);
    Ok(())
}
