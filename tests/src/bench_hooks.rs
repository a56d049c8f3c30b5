//! `evbench hooks`: what evctl's pre-commit gate adds to a `git commit`.
//!
//! In one generated repository per size (1k, 10k and 100k ticks; `--no-100k` skips the last),
//! its decisions committed (so git's index holds every tick, as in a team's repository), with
//! `evctl hooks install` done and a warm evd, the same kind of commit (one line appended to
//! a file many decisions guard, saved before a user's pause, staged right before the commit,
//! untimed) is timed with the hook, with `--no-verify`, and with an empty `sh` hook in the
//! gate's place (what git pays for running any pre-commit hook: the gate's floor), in rotation,
//! and the medians are compared. Before each timed commit evd is given what a user's pause between commits gives it:
//! the evaluation for the new HEAD (an untimed `evctl hook pre-commit`). A second series commits
//! right after the previous commit (and its edit), so the hook finds evd still re-evaluating
//! after HEAD moved.
//!
//! The gate is installed as a user with evctl on `PATH` gets it: the direct form, a link to evctl
//! that git starts with no shell in between. A generated store gates (it holds stale and not-run
//! verdicts), so the hook would block every commit; the bench's commits run with
//! `EVCTL_GATE_WARN_ONLY=1`, which lets the commit through after the same work: the same evctl
//! run, the same request, the same message.
//!
//! The line says how the measured evctl is linked: `scripts/build-release` (and so
//! `scripts/install`, `scripts/demo` and the Debian package) links it statically on Linux with
//! glibc, which saves about a third of a millisecond of its start on every commit; a plain
//! `cargo build` links it dynamically.
//!
//! A breakdown for the profile follows: the hook's evctl alone, `git diff --cached` (what the
//! hook ran for the staged paths before evd read the index itself, and still runs where evd
//! cannot), and a bare evctl start.
//!
//! Then, at 10k: `evctl reverify <id>` of a decision a commit made stale whose run at HEAD is
//! already green (what it costs after `check --run`), and the merge driver as git runs it on a
//! merge of two branches that both decided (`sh -c` with the registered command).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{fmt_dur, git_output, size_fixtures, stats, Fixture, Report, Res, World};

/// Whether `evbench hooks` was asked for.
pub fn selected() -> bool {
    std::env::args().skip(1).any(|a| a == "hooks")
}

/// The file the timed commits change: one the generator's test bindings watch.
const CHANGED: &str = "db/schema.sql";

/// A `git` command in `root` with the bench's environment and the bench's evctl first on PATH
/// (so the hook runs the release build).
fn git(w: &World, root: &Path) -> Command {
    let mut c = w.command(Path::new("git"));
    c.current_dir(root)
        .env("PATH", path_with_bench_evctl(w))
        .env_remove("EVCTL_NO_HOOKS")
        .env("EVCTL_GATE_WARN_ONLY", "1")
        .stdout(Stdio::null());
    c
}

fn git_ok(w: &World, root: &Path, args: &[&str]) -> Res<()> {
    git_output(&mut git(w, root), args).map(|_| ())
}

/// Time one `git commit` of a freshly staged change; with the hook unless `no_verify`.
/// A user's edit of the much-guarded file, saved before the pause that precedes the commit
/// that stages it (an edit made in the very instant of a commit is the rushed series' case).
fn edit(root: &Path, n: usize) -> Res<()> {
    use std::io::Write;
    let file = root.join(CHANGED);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    writeln!(f, "-- bench change {n}").map_err(|e| e.to_string())
}

/// How a timed commit runs its pre-commit hook.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hooked {
    /// evctl's gate (the bench's copy of the installed script).
    Gate,
    /// `--no-verify`: no hook at all.
    NoVerify,
    /// An empty `sh` script in the gate's place: what git pays for running any pre-commit hook
    /// (starting it, and reading its index again afterwards), the gate's floor.
    Empty,
}

/// An empty hook, for [`Hooked::Empty`].
const EMPTY_HOOK: &str = "#!/bin/sh\nexit 0\n";

/// `git add` of the edited file (untimed), then a timed `git commit`; then the edit the next
/// commit stages.
fn timed_commit(w: &World, root: &Path, n: usize, how: Hooked) -> Res<Duration> {
    git_ok(w, root, &["add", CHANGED])?;
    let msg = format!("bench {n}");
    let mut args = vec!["commit", "-q", "-m", msg.as_str()];
    let no_verify = how == Hooked::NoVerify;
    if no_verify {
        args.push("--no-verify");
    }
    let hook = root.join(".git/hooks/pre-commit");
    let gate = match how {
        Hooked::Empty => {
            // The gate is a link to evctl: the link itself is put aside, never written through.
            let gate = std::fs::read_link(&hook).map_err(|e| format!("{}: {e}", hook.display()))?;
            std::fs::remove_file(&hook).map_err(|e| e.to_string())?;
            std::fs::write(&hook, EMPTY_HOOK).map_err(|e| e.to_string())?;
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
            Some(gate)
        }
        _ => None,
    };
    let t = Instant::now();
    let out = git(w, root)
        .args(&args)
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("git commit: {e}"))?;
    let took = t.elapsed();
    if let Some(gate) = gate {
        std::fs::remove_file(&hook).map_err(|e| e.to_string())?;
        std::os::unix::fs::symlink(&gate, &hook).map_err(|e| e.to_string())?;
    }
    if !out.status.success() {
        return Err(format!(
            "git commit failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if how == Hooked::Gate && out.stderr.is_empty() {
        return Err("the hook said nothing: did it run?".into());
    }
    edit(root, n + 1)?;
    Ok(took)
}

/// Let evd catch up with the new HEAD, as a pause between real commits would.
fn settle(w: &World, root: &Path) -> Res<()> {
    w.evctl_output(root, &["hook", "pre-commit"]).map(|_| ())?;
    idle(w, root)
}

/// A user's pause between two commits: long enough for evd to have done what it leaves for
/// after an answer (at most 250 ms later) and for a quiet moment (its journal 200 ms, the git
/// answers it keeps 1 s after the last request, its images). Nothing is asked of evd meanwhile.
fn idle(_w: &World, _root: &Path) -> Res<()> {
    std::thread::sleep(PAUSE);
    Ok(())
}

/// See [`idle`].
const PAUSE: Duration = Duration::from_millis(1500);

/// Install the gate, then make the bench's copy let a gated commit through.
fn install(w: &World, fx: &Fixture) -> Res<PathBuf> {
    git_ok(w, &fx.root, &["config", "user.name", "Bench"])?;
    git_ok(
        w,
        &fx.root,
        &["config", "user.email", "bench@example.invalid"],
    )?;
    // As a team keeps it: the decisions committed (the index then holds every tick, as the
    // gate reads it on each commit), the per-host results ignored.
    std::fs::write(fx.root.join(".gitignore"), ".evolving/results/\n")
        .map_err(|e| format!(".gitignore: {e}"))?;
    git_ok(w, &fx.root, &["add", "-A", ".gitignore", ".evolving"])?;
    git_ok(
        w,
        &fx.root,
        &[
            "commit",
            "-q",
            "--no-verify",
            "-m",
            "the decisions, committed",
        ],
    )?;
    let out = w
        .command(&w.bins.evctl)
        .current_dir(&fx.root)
        .env("PATH", path_with_bench_evctl(w))
        .args(["hooks", "install"])
        .output()
        .map_err(|e| format!("evctl hooks install: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "evctl hooks install failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let hook = fx.root.join(".git/hooks/pre-commit");
    // The direct form: evctl on PATH is the bench's.
    let to = std::fs::read_link(&hook).map_err(|e| {
        format!(
            "{} is not the direct gate (a link to evctl): {e}\n{}",
            hook.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    if std::fs::metadata(&to).map(|m| m.ino()).ok()
        != std::fs::metadata(&w.bins.evctl).map(|m| m.ino()).ok()
    {
        return Err(format!(
            "the gate links to {}, not the bench's evctl",
            to.display()
        ));
    }
    Ok(hook)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One size: the paired series, the unsettled series, and (once) the breakdown.
fn one(
    w: &World,
    fx: &Fixture,
    report: &mut Report,
    pairs: usize,
    summary: &mut Vec<String>,
) -> Res<()> {
    println!("\n-- {} ticks ({}) --", fx.ticks, fx.label);
    install(w, fx)?;
    let t = Instant::now();
    w.evctl(&fx.root, &["check"])?;
    println!(
        "  first `evctl check` (evd opens and evaluates the store): {}",
        fmt_dur(t.elapsed())
    );
    edit(&fx.root, 0)?;
    settle(w, &fx.root)?;
    // Warm-up: one of each, untimed.
    let mut n = 0;
    for how in [Hooked::Gate, Hooked::NoVerify, Hooked::Empty] {
        n += 1;
        timed_commit(w, &fx.root, n, how)?;
        settle(w, &fx.root)?;
    }
    let (mut with, mut without, mut empty) = (Vec::new(), Vec::new(), Vec::new());
    let (mut diffs, mut floor) = (Vec::new(), Vec::new());
    let kinds = [Hooked::Gate, Hooked::NoVerify, Hooked::Empty];
    for i in 0..pairs {
        // Rotate which goes first, so drift falls on all alike.
        let mut three = [Duration::ZERO; 3];
        for k in 0..3 {
            let at = (i + k) % 3;
            n += 1;
            three[at] = timed_commit(w, &fx.root, n, kinds[at])?;
            settle(w, &fx.root)?;
        }
        with.push(three[0]);
        without.push(three[1]);
        empty.push(three[2]);
        diffs.push(ms(three[0]) - ms(three[1]));
        floor.push(ms(three[2]) - ms(three[1]));
    }
    diffs.sort_by(f64::total_cmp);
    floor.sort_by(f64::total_cmp);
    let paired = diffs[diffs.len() / 2];
    let (mw, mo, me) = (
        median(with.clone()),
        median(without.clone()),
        median(empty.clone()),
    );
    report.add("commit", fx.label, "git commit, gate (warm)", stats(with));
    report.add("commit", fx.label, "git commit --no-verify", stats(without));
    report.add("commit", fx.label, "git commit, empty hook", stats(empty));
    // Right after a commit: evd is still re-evaluating for the HEAD that just moved.
    let mut rushed = Vec::new();
    for _ in 0..(pairs / 3).max(3) {
        n += 1;
        timed_commit(w, &fx.root, n, Hooked::NoVerify)?;
        n += 1;
        rushed.push(timed_commit(w, &fx.root, n, Hooked::Gate)?);
    }
    settle(w, &fx.root)?;
    let mr = median(rushed.clone());
    report.add(
        "commit",
        fx.label,
        "gate, right after a commit",
        stats(rushed),
    );
    let line = format!(
        "hooks {:>4}: gate adds {:.1} ms to git commit (median {} with, {} without; median of paired differences {:.1} ms), of which git's own cost of running any hook (an empty one) {:.1} ms (median of paired differences {:.1} ms; {} with it); right after a previous commit it adds {:.1} ms ({})",
        fx.label,
        ms(mw) - ms(mo),
        fmt_dur(mw),
        fmt_dur(mo),
        paired,
        ms(me) - ms(mo),
        floor[floor.len() / 2],
        fmt_dur(me),
        ms(mr) - ms(mo),
        linkage(&w.bins.evctl)
    );
    println!("  {line}");
    summary.push(line);
    Ok(())
}

/// Where the hook's time goes, at one size: its evctl alone (a staged change, evd warm), the
/// git it runs for the staged paths, and evctl starting and exiting.
fn breakdown(w: &World, fx: &Fixture, summary: &mut Vec<String>) -> Res<()> {
    use std::io::Write;
    let file = fx.root.join(CHANGED);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    writeln!(f, "-- breakdown").map_err(|e| e.to_string())?;
    git_ok(w, &fx.root, &["add", CHANGED])?;
    settle(w, &fx.root)?;
    // Round-robin, so that whatever else the machine is doing falls on all three alike; git
    // first, so that it never starts while evd is still busy after the hook's request.
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for round in 0..22 {
        for (which, v) in samples.iter_mut().enumerate() {
            let t = Instant::now();
            match which {
                1 => w
                    .evctl_output(&fx.root, &["hook", "pre-commit"])
                    .map(|_| ())?,
                0 => git(w, &fx.root)
                    .args(["diff", "--cached", "--name-only", "-z", "--no-renames"])
                    .stderr(Stdio::null())
                    .status()
                    .map(|_| ())
                    .map_err(|e| e.to_string())?,
                _ => w.evctl_output(&fx.root, &["--version"]).map(|_| ())?,
            }
            // The first round only warms up.
            if round > 0 {
                v.push(t.elapsed());
            }
        }
    }
    let [diff, hook, bare] = samples.map(median);
    let line = format!(
        "hooks {:>4} breakdown: `evctl hook pre-commit` {} in all (a staged change, evd warm); `git diff --cached` alone {} (what evd's own reading of the index spares the hook); evctl starting and exiting {}",
        fx.label,
        fmt_dur(hook),
        fmt_dur(diff),
        fmt_dur(bare)
    );
    println!("  {line}");
    summary.push(line);
    git_ok(w, &fx.root, &["reset", "-q"])?;
    Ok(())
}

/// How the measured evctl is linked, which its start-up time depends on: a program with an
/// interpreter (`PT_INTERP`, the dynamic loader) is linked dynamically. scripts/build-release
/// links it statically on Linux with glibc; `cargo build` does not.
fn linkage(exe: &Path) -> &'static str {
    const PT_INTERP: u32 = 3;
    let Ok(bytes) = std::fs::read(exe) else {
        return "evctl unreadable";
    };
    let u16_at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |o: usize| {
        bytes
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        bytes
            .get(o..o + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    // A little-endian 64-bit ELF file only (the machines the bench runs on).
    if !bytes.starts_with(b"\x7fELF\x02\x01") {
        return "evctl's linking not known: not a little-endian 64-bit ELF file";
    }
    let (Some(phoff), Some(size), Some(count)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return "evctl's linking not known: a short ELF header";
    };
    let interp = (0..usize::from(count)).any(|i| {
        usize::try_from(phoff)
            .ok()
            .and_then(|o| o.checked_add(i.checked_mul(usize::from(size))?))
            .and_then(u32_at)
            == Some(PT_INTERP)
    });
    if interp {
        "evctl linked dynamically; scripts/build-release links it statically"
    } else {
        "evctl linked statically"
    }
}

/// `evctl reverify <id>` of a decision a commit made stale, its run at HEAD already recorded
/// green: the bench's store reads staleness against the local HEAD, as `evctl setup` leaves it.
fn reverify(w: &World, fx: &Fixture, report: &mut Report, summary: &mut Vec<String>) -> Res<()> {
    let config = fx.root.join(".evolving/config");
    let text = std::fs::read_to_string(&config).map_err(|e| e.to_string())?;
    let text = text
        .replace(
            "staleness_ref = \"live-origin\"",
            "staleness_ref = \"local-head\"",
        )
        .replace(
            "template = \"pytest {selector}\"",
            "template = \"{selector}\"",
        );
    std::fs::write(&config, text).map_err(|e| e.to_string())?;
    let guarded = fx.root.join("rv.txt");
    std::fs::write(&guarded, "0\n").map_err(|e| e.to_string())?;
    git_ok(w, &fx.root, &["add", "rv.txt"])?;
    git_ok(w, &fx.root, &["commit", "-q", "--no-verify", "-m", "rv"])?;
    let said = w.evctl(
        &fx.root,
        &[
            "decide",
            "reverify bench",
            "--assume",
            "rv.txt is there",
            "--assume-test",
            "test -f rv.txt",
            "--counter-test",
            "test -f rv.missing",
            // A platform of its own: `check --run` below runs this one test, not every
            // binding of the generated store that names `local`.
            "--on-platform",
            RV_PLATFORM,
            "--triggered-by",
            "rv.txt",
            "--surface",
            "bench",
            "--blame",
            "bench",
        ],
    )?;
    let mut id = said
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| format!("decide said {said:?}"))?
        .to_string();
    let mut times = Vec::new();
    for n in 0..16 {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&guarded)
            .map_err(|e| e.to_string())?;
        writeln!(f, "{n}").map_err(|e| e.to_string())?;
        git_ok(
            w,
            &fx.root,
            &["add", "-A", "rv.txt", ".evolving/ticks", ".evolving/HEAD"],
        )?;
        git_ok(
            w,
            &fx.root,
            &["commit", "-q", "--no-verify", "-m", "touch rv"],
        )?;
        w.evctl(&fx.root, &["check", "--run", "--platform", RV_PLATFORM])?;
        w.evctl(&fx.root, &["check"])?;
        idle(w, &fx.root)?;
        let t = Instant::now();
        let out = w.evctl(&fx.root, &["reverify", id.as_str()])?;
        let took = t.elapsed();
        // "reverified <id> … wrote child <child> (supersedes <id>)"
        id = out
            .split("wrote child ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .ok_or_else(|| format!("reverify said {out:?}"))?
            .to_string();
        if n > 0 {
            times.push(took);
        }
    }
    let said = format!(
        "reverify {:>4}: one decision whose run at HEAD is green",
        fx.label
    );
    tell(
        report,
        summary,
        ("reverify", fx.label, "one decision, green at HEAD"),
        times,
        &said,
    );
    Ok(())
}

/// The platform the re-verified decision's test is bound to.
const RV_PLATFORM: &str = "rvbench";

/// The merge driver as git runs it for `.evolving/HEAD` (`sh -c` with the command `hooks
/// install` registered, on three temporary versions): what it adds to a merge.
fn merge_driver(
    w: &World,
    fx: &Fixture,
    report: &mut Report,
    summary: &mut Vec<String>,
) -> Res<()> {
    let out = git(w, &fx.root)
        .args(["config", "--get", "merge.evctl-head.driver"])
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    let command = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if command.is_empty() {
        return Err("no merge driver registered".into());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (base, theirs) = (dir.path().join("base"), dir.path().join("theirs"));
    std::fs::write(&base, "0a1b2c3d4e5f").map_err(|e| e.to_string())?;
    std::fs::write(&theirs, "9f8e7d6c5b4a").map_err(|e| e.to_string())?;
    let ours = dir.path().join("ours");
    let mut times = Vec::new();
    for n in 0..31 {
        std::fs::write(&ours, "5a5a5a5a5a5a").map_err(|e| e.to_string())?;
        let line = command
            .replace("%O", &base.display().to_string())
            .replace("%A", &ours.display().to_string())
            .replace("%B", &theirs.display().to_string())
            .replace("%P", ".evolving/HEAD");
        let t = Instant::now();
        let st = Command::new("sh")
            .arg("-c")
            .arg(&line)
            .current_dir(&fx.root)
            .env("PATH", path_with_bench_evctl(w))
            .status()
            .map_err(|e| e.to_string())?;
        let took = t.elapsed();
        let merged = std::fs::read_to_string(&ours).map_err(|e| e.to_string())?;
        if !st.success() || merged.trim() != "9f8e7d6c5b4a" {
            return Err(format!("the merge driver gave {merged:?} ({st})"));
        }
        if n > 0 {
            times.push(took);
        }
    }
    let said = format!(
        "merge {:>4}: what the merge driver adds to a merge, as git runs it",
        fx.label
    );
    tell(
        report,
        summary,
        ("merge", fx.label, "merge driver for .evolving/HEAD"),
        times,
        &said,
    );
    Ok(())
}

/// One timed series: its row (verb, store, via) in the report, and `said` with its median in the
/// summary.
fn tell(
    report: &mut Report,
    summary: &mut Vec<String>,
    (verb, store, via): (&'static str, &'static str, &'static str),
    times: Vec<Duration>,
    said: &str,
) {
    let line = format!("{said}: {} (median)", fmt_dur(median(times.clone())));
    report.add(verb, store, via, stats(times));
    println!("  {line}");
    summary.push(line);
}

/// `PATH` with the bench's evctl first.
fn path_with_bench_evctl(w: &World) -> String {
    let bins = w
        .bins
        .evctl
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The whole section.
pub fn run(w: &World, report: &mut Report, started: Instant) -> Res<()> {
    println!("\nhooks: what the pre-commit gate adds to `git commit` (warm evd)");
    let fixtures = size_fixtures()?;
    let mut daemon = w.start_daemon()?;
    let mut summary = Vec::new();
    for fx in &fixtures {
        // At 100k every settle is a full re-evaluation for the new HEAD (tens of seconds).
        let pairs = if fx.ticks >= 100_000 { 9 } else { 31 };
        one(w, fx, report, pairs, &mut summary)?;
        if fx.ticks == 10_000 {
            breakdown(w, fx, &mut summary)?;
            merge_driver(w, fx, report, &mut summary)?;
            reverify(w, fx, report, &mut summary)?;
        }
    }
    println!("\nshutdown: {}", daemon.shutdown());
    println!("\nsummary ({} total):", fmt_dur(started.elapsed()));
    report.table();
    for l in &summary {
        println!("{l}");
    }
    println!(
        "targets at 10k ticks: the gate adds at most 5 ms to git commit; reverify of one decision at most 20 ms; the merge driver adds at most 20 ms to a merge"
    );
    Ok(())
}
