//! A synthetic, realistic `.evolving/` store for tests and benchmarks, built in Rust from the
//! project's own model code, so nothing outside the repository is needed to make one.
//!
//! What [`generate`] leaves in a directory:
//!
//! * a git repository (`git init -b main` when the directory has no `.git`); when it has no
//!   commits yet, a short history whose commits edit the files the generated test bindings list
//!   in `triggered_by` (an existing history is used as it is); plus a local `origin/<branch>` ref at `HEAD` set as the branch upstream, so the
//!   `live-origin` staleness reference resolves;
//! * the layout and config exactly as `init` creates them ([`evd::store::Store::init`]);
//! * `ticks` ticks in one parent chain, written with [`proto::Tick::file_bytes`] and named by
//!   [`proto::id::tick_id`], `HEAD` naming the last one;
//! * receipts for most test bindings, one file per selector ([`proto::id::receipt_key`]), lines
//!   from [`evd::engine::receipts::Receipt::line`], naming commits of that history.
//!
//! The mix, drawn from a small seeded PRNG: human decisions (person re-checks, unbound grounds,
//! rejected roads, test bindings with counter-tests and full liveness, tripwire tests on
//! user-ruled rejected roads), imported history (string and object `source_ref`, some harvested
//! bindings without a counter-test), agent proposals and their later ratifications, re-tags and
//! overturns (`supersedes`), declared authority and jurisdiction A–D (never C/D on a test-bound
//! payload). Times are measured back from a fixed `now`, git commits use a fixed identity and
//! fixed dates: the same options give the same bytes, every run.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use evd::engine::receipts::{Receipt, RunResult};
use proto::{Check, Ground, Liveness, SourceRef, Tick};
use serde_json::{Map, Value};

/// The `now` the tests and benches pin, so their stores never change.
pub const FIXED_NOW: &str = "2026-11-01T00:00:00Z";

/// How much to generate and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub ticks: usize,
    pub seed: u64,
    /// Share of newly authored ticks that carry at least one test check.
    pub test_bound: f64,
    /// Receipt lines per test binding that has been run at all.
    pub receipts_per_test: usize,
    /// Commits to make when the directory has no history yet.
    pub commits: usize,
    /// RFC 3339 instant that `held_since` and `ran_at` are measured back from.
    pub now: String,
    /// Point `origin/<branch>` at HEAD and make it the branch upstream.
    pub upstream: bool,
    /// Replace an existing `.evolving/` instead of refusing.
    pub force: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ticks: 1000,
            seed: 1,
            test_bound: 0.3,
            receipts_per_test: 3,
            commits: 8,
            now: FIXED_NOW.to_string(),
            upstream: true,
            force: false,
        }
    }
}

/// What was generated: the ids worth knowing and how many of each kind.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub dir: PathBuf,
    pub head: String,
    pub genesis: String,
    /// A tick from the middle of the chain (handy for `show`).
    pub sample_id: String,
    /// The selector of the newest test binding (handy for `why`).
    pub why_selector: Option<String>,
    /// `git rev-parse HEAD` of the repository.
    pub git_head: String,
    pub counts: BTreeMap<&'static str, usize>,
}

impl Summary {
    pub fn count(&self, what: &str) -> usize {
        self.counts.get(what).copied().unwrap_or(0)
    }

    /// One compact JSON line.
    pub fn to_json(&self) -> String {
        let mut o = Map::new();
        o.insert("dir".into(), self.dir.display().to_string().into());
        o.insert("head".into(), self.head.clone().into());
        o.insert("genesis".into(), self.genesis.clone().into());
        o.insert("sample_id".into(), self.sample_id.clone().into());
        o.insert(
            "why_selector".into(),
            self.why_selector.clone().map_or(Value::Null, Value::from),
        );
        o.insert("git_head".into(), self.git_head.clone().into());
        let counts: Map<String, Value> = self
            .counts
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        o.insert("counts".into(), Value::Object(counts));
        proto::json::compact(&Value::Object(o))
    }
}

/// Build the store (and, if needed, the git history) in `dir`.
pub fn generate(dir: &Path, opts: &Options) -> Result<Summary, String> {
    if opts.ticks == 0 {
        return Err("gen_store: --ticks must be at least 1".into());
    }
    if !(0.0..=1.0).contains(&opts.test_bound) {
        return Err("gen_store: the test-bound share must lie within 0..=1".into());
    }
    let now = evd::engine::clock::parse(&opts.now)
        .ok_or_else(|| format!("gen_store: `{}` is not an RFC 3339 time", opts.now))?;
    fs::create_dir_all(dir).map_err(|e| format!("gen_store: creating {}: {e}", dir.display()))?;
    let root = fs::canonicalize(dir).map_err(|e| format!("gen_store: {}: {e}", dir.display()))?;
    let ev = root.join(".evolving");
    if fs::symlink_metadata(&ev).is_ok() {
        if !opts.force {
            return Err(format!(
                "gen_store: {} already exists (force replaces it)",
                ev.display()
            ));
        }
        fs::remove_dir_all(&ev)
            .map_err(|e| format!("gen_store: removing {}: {e}", ev.display()))?;
    }

    // The history gets its own stream, so its shape does not depend on the number of ticks.
    let mut git_rng = Rng::new(opts.seed ^ 0x6a09_e667_f3bc_c908);
    let shas = prepare_history(&root, opts, &mut git_rng)?;

    // `now` stays a value of evd's clock type; the closure keeps this crate free of `time`.
    let stamp = move |secs_back: u64, nanos: u64| {
        evd::engine::clock::format(
            now - Duration::from_secs(secs_back) + Duration::from_nanos(nanos),
        )
    };
    let mut mix = Mix::new(opts, shas, Box::new(stamp));
    mix.build();

    let mut store = evd::store::Store::new(root.clone());
    match store.init() {
        Ok(true) => {}
        Ok(false) => return Err(format!("gen_store: {} appeared meanwhile", ev.display())),
        Err(e) => return Err(format!("gen_store: init: {}", e.message)),
    }
    let summary = mix.write(&root)?;
    Ok(summary)
}

// ---------------------------------------------------------------------------------------------
// A tiny deterministic PRNG: splitmix64 (Steele, Lea, Flood 2014). Plenty for picking words.

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by the multiply-shift reduction.
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below((hi - lo) as usize) as u64
    }

    /// Uniform in `[0, 1)` with 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }

    /// `k` distinct elements of `from`, in drawn order.
    fn choose<T: Clone>(&mut self, from: &[T], k: usize) -> Vec<T> {
        let mut idx: Vec<usize> = (0..from.len()).collect();
        let k = k.min(idx.len());
        for i in 0..k {
            let j = i + self.below(idx.len() - i);
            idx.swap(i, j);
        }
        idx[..k].iter().map(|&i| from[i].clone()).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Word lists. The odd non-ASCII mark and quote keep escaping and UTF-8 honest.

/// Files the test bindings watch; the generated history edits them.
const WATCHED: [&str; 12] = [
    "Cargo.toml",
    "pyproject.toml",
    "package.json",
    "Dockerfile",
    "db/schema.sql",
    "db/migrations/0001_init.sql",
    "api/routes.py",
    "auth/session.rs",
    "search/ranker.rs",
    "deploy/limits.yaml",
    "infra/queue.tf",
    ".ci/pipeline.yml",
];
const PLATFORMS: [&str; 4] = ["linux-ci", "mac", "ship-image", "local"];
const SURFACES: [&str; 8] = [
    "deps",
    "schema-ddl",
    "public-api",
    "auth-flow",
    "quotas",
    "container",
    "ranking",
    "on-disk-layout",
];
const PEOPLE: [&str; 7] = [
    "Wang Yu",
    "Ana Lima",
    "Priya N.",
    "Jonas Berg",
    "Zoë Adeyemi",
    "Tomás Ortega",
    "Kim Seo-yeon",
];
const AGENTS: [&str; 4] = ["agent", "agent-claude-7", "triage-bot", "planner-3"];
const AREAS: [&str; 12] = [
    "retrieval",
    "billing",
    "auth",
    "search",
    "ingest",
    "storage",
    "api",
    "scheduler",
    "cache",
    "deploy",
    "metrics",
    "exports",
];
const TOOLS: [&str; 14] = [
    "postgres",
    "sqlite",
    "redis",
    "kafka",
    "nats",
    "s3",
    "grpc",
    "graphql",
    "tokio",
    "pgvector",
    "opensearch",
    "tantivy",
    "haproxy",
    "envoy",
];
const MOVES: [&str; 10] = [
    "keep", "adopt", "split", "freeze", "pin", "retire", "gate", "cap", "batch", "shard",
];
const BECAUSE: [&str; 14] = [
    "on-call already knows how to run it",
    "one fewer moving part in the deploy",
    "p99 must stay under 200 ms",
    "its licence forbids shipping it to customers",
    "a second datastore doubles the pager load",
    "the primary database already serialises these writes",
    "DDL has to stay reviewable by humans",
    "no migration budget left this quarter",
    "upstream has not cut a release in two years",
    "it would pin our schema to its model",
    "nobody wrote a runbook for it",
    "load tests showed no gain at our volume",
    "builds would stop being reproducible",
    "clients depend on the \"v1\" wire format",
];
const RECHECKS: [&str; 5] = [
    "quarterly architecture review",
    "after the v2 launch",
    "next capacity planning",
    "2027-02",
    "when traffic doubles",
];
const TAILS: [&str; 9] = ["", "", "", "", "", " — see ADR", " (→ v2)", " · 约束", " ✓"];

// ---------------------------------------------------------------------------------------------
// Git: a fixed-identity history that touches the watched files.

const GIT_NAME: &str = "Store Generator";
const GIT_EMAIL: &str = "gen-store@example.invalid";
const GIT_LIMIT: Duration = Duration::from_secs(30);

/// Run git in `root` with a time limit; its trimmed stdout, or a message naming the command.
fn git(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let shown = format!("git {}", args.join(" "));
    let mut cmd = Command::new("git");
    cmd.current_dir(root)
        .args(args)
        // Neither the system's nor the user's git config may change the history (hooks,
        // signing, templates): the same options must give the same commits everywhere.
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("gen_store: cannot run `{shown}` (is git installed?): {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() > GIT_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "gen_store: `{shown}` in {} did not finish within {} s",
                    root.display(),
                    GIT_LIMIT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("gen_store: waiting for `{shown}`: {e}")),
        }
    };
    // Every command here prints a few lines at most, far below a pipe's buffer.
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    if !status.success() {
        return Err(format!(
            "gen_store: `{shown}` failed in {}: {}",
            root.display(),
            err.trim()
        ));
    }
    Ok(out.trim().to_string())
}

/// Make sure `root` has history; returns up to `commits` shas, oldest first (at least one).
fn prepare_history(root: &Path, opts: &Options, rng: &mut Rng) -> Result<Vec<String>, String> {
    if !root.join(".git").exists() {
        git(root, &["init", "-q", "-b", "main"], &[])?;
    }
    let has_commits = git(root, &["rev-parse", "--verify", "-q", "HEAD"], &[]).is_ok();
    let wanted = opts.commits.max(1);
    if !has_commits {
        let id_name = format!("user.name={GIT_NAME}");
        let id_email = format!("user.email={GIT_EMAIL}");
        for n in 0..wanted {
            let touched: Vec<&str> = if n == 0 {
                WATCHED.to_vec()
            } else {
                let k = 1 + rng.below(3);
                rng.choose(&WATCHED, k)
            };
            for rel in &touched {
                let path = root.join(rel);
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)
                        .map_err(|e| format!("gen_store: creating {}: {e}", parent.display()))?;
                }
                let mut text = fs::read_to_string(&path).unwrap_or_default();
                text.push_str(&format!("# change {n} to {rel}\n"));
                fs::write(&path, text)
                    .map_err(|e| format!("gen_store: writing {}: {e}", path.display()))?;
            }
            let mut add = vec!["add", "--"];
            add.extend(touched.iter().copied());
            git(root, &add, &[])?;
            // Fixed dates, one minute apart: the same history (and shas) every run.
            let date = format!("2026-01-01T{:02}:{:02}:00Z", n / 60 % 24, n % 60);
            let message = format!("edit {} watched file(s), change {n}", touched.len());
            git(
                root,
                &[
                    "-c",
                    &id_name,
                    "-c",
                    &id_email,
                    "-c",
                    "commit.gpgsign=false",
                    "-c",
                    "core.hooksPath=/dev/null",
                    "commit",
                    "-q",
                    "--no-verify",
                    "-m",
                    &message,
                ],
                &[
                    ("GIT_AUTHOR_NAME", GIT_NAME),
                    ("GIT_AUTHOR_EMAIL", GIT_EMAIL),
                    ("GIT_AUTHOR_DATE", &date),
                    ("GIT_COMMITTER_NAME", GIT_NAME),
                    ("GIT_COMMITTER_EMAIL", GIT_EMAIL),
                    ("GIT_COMMITTER_DATE", &date),
                ],
            )?;
        }
    }
    let listed = git(
        root,
        &["rev-list", "--reverse", "-n", &wanted.to_string(), "HEAD"],
        &[],
    )?;
    let shas: Vec<String> = listed.split_whitespace().map(str::to_string).collect();
    if shas.is_empty() {
        return Err(format!("gen_store: {} has no commits", root.display()));
    }
    if opts.upstream {
        let branch = git(root, &["symbolic-ref", "--short", "HEAD"], &[])?;
        let url = root.display().to_string();
        git(root, &["config", "remote.origin.url", &url], &[])?;
        git(
            root,
            &[
                "config",
                "remote.origin.fetch",
                "+refs/heads/*:refs/remotes/origin/*",
            ],
            &[],
        )?;
        let tracking = format!("refs/remotes/origin/{branch}");
        git(root, &["update-ref", &tracking, "HEAD"], &[])?;
        git(
            root,
            &["config", &format!("branch.{branch}.remote"), "origin"],
            &[],
        )?;
        git(
            root,
            &[
                "config",
                &format!("branch.{branch}.merge"),
                &format!("refs/heads/{branch}"),
            ],
            &[],
        )?;
    }
    Ok(shas)
}

// ---------------------------------------------------------------------------------------------
// The mix.

/// The receipts of one selector (empty for a binding nobody ever ran).
struct Runs {
    selector: String,
    lines: Vec<Receipt>,
}

struct Mix<'o> {
    opts: &'o Options,
    rng: Rng,
    shas: Vec<String>,
    /// `now` minus whole seconds, plus nanoseconds, as ev writes a timestamp.
    stamp: Box<dyn Fn(u64, u64) -> String>,
    ticks: Vec<Tick>,
    /// Per tick: replaced by a later re-tag or overturn.
    replaced: Vec<bool>,
    /// Proposals not ratified yet (indices into `ticks`).
    unratified: Vec<usize>,
    /// Selectors already bound, to their entry in `runs`.
    bound: HashMap<String, usize>,
    runs: Vec<Runs>,
    /// Selectors that later decisions may bind again.
    reusable: Vec<String>,
    counts: BTreeMap<&'static str, usize>,
}

/// A tick with its payload and blame; the chain fields are filled in by [`Mix::append`].
fn draft(decision: String, observe: String, grounds: Vec<Ground>, blame: &str) -> Tick {
    Tick {
        decision,
        observe,
        grounds,
        parent_id: String::new(),
        id: String::new(),
        status: "live".to_string(),
        held_since: String::new(),
        blame: blame.to_string(),
        authority: None,
        jurisdiction: None,
        source_ref: None,
        provenance: None,
        supersedes: None,
        ratifies: None,
        unknown_keys: Vec::new(),
    }
}

fn owned(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v.dedup();
    v
}

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

impl<'o> Mix<'o> {
    fn new(opts: &'o Options, shas: Vec<String>, stamp: Box<dyn Fn(u64, u64) -> String>) -> Self {
        Mix {
            opts,
            rng: Rng::new(opts.seed),
            shas,
            stamp,
            ticks: Vec::with_capacity(opts.ticks),
            replaced: Vec::with_capacity(opts.ticks),
            unratified: Vec::new(),
            bound: HashMap::new(),
            runs: Vec::new(),
            reusable: Vec::new(),
            counts: BTreeMap::new(),
        }
    }

    fn bump(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    // --- words -----------------------------------------------------------------------------

    fn decision(&mut self, i: usize) -> String {
        let r = &mut self.rng;
        let area = r.pick(&AREAS);
        let verb = r.pick(&MOVES);
        let tools = r.choose(&TOOLS, 2);
        format!(
            "{area}: {verb} {} over {} (#{i}){}",
            tools[0],
            tools[1],
            r.pick(&TAILS)
        )
    }

    fn claim(&mut self, i: usize, g: usize) -> String {
        format!("{} [{i}/{g}]", self.rng.pick(&BECAUSE))
    }

    fn observe(&mut self, i: usize) -> String {
        let x = self.rng.unit();
        if x < 0.15 {
            String::new()
        } else if x < 0.55 {
            format!(
                "review round {}: {} in question",
                4000 + i,
                self.rng.pick(&AREAS)
            )
        } else {
            format!("after {} incident {}", self.rng.pick(&AREAS), 300 + i)
        }
    }

    /// A commit of the history: mostly the newest, else an older one.
    fn commit(&mut self, newest: f64) -> String {
        let last = self.shas.len() - 1;
        if last == 0 || self.rng.chance(newest) {
            self.shas[last].clone()
        } else {
            self.shas[self.rng.below(last)].clone()
        }
    }

    // --- grounds ---------------------------------------------------------------------------

    fn test_check(&mut self, i: usize, g: usize, with_counter: bool) -> Check {
        let selector = if !self.reusable.is_empty() && self.rng.chance(0.05) {
            self.rng.pick(&self.reusable).clone()
        } else {
            let area = *self.rng.pick(&AREAS);
            let tool = *self.rng.pick(&TOOLS);
            let s = if self.rng.chance(0.6) {
                format!("pytest tests/{area}/test_{tool}_{i}.py::test_ground_{g}")
            } else {
                format!("cargo test -p {area} --test {tool}_{i} ground_{g}")
            };
            if self.rng.chance(0.1) {
                self.reusable.push(s.clone());
            }
            s
        };
        let n_platforms = if self.rng.chance(1.0 / 3.0) { 2 } else { 1 };
        let n_watched = 1 + self.rng.below(3);
        let n_surfaces = if self.rng.chance(1.0 / 3.0) { 2 } else { 1 };
        let liveness = Liveness {
            platforms: owned(&self.rng.choose(&PLATFORMS, n_platforms)),
            triggered_by: owned(&self.rng.choose(&WATCHED, n_watched)),
            surfaces: owned(&self.rng.choose(&SURFACES, n_surfaces)),
        };
        let counter_test = with_counter.then(|| format!("{selector} --expect-red"));
        self.bump("test_grounds");
        if !with_counter {
            self.bump("harvested_bindings");
        }
        self.record_runs(&selector, &liveness.platforms, with_counter);
        Check::Test {
            reference: selector,
            verified_at_sha: self.commit(0.75),
            counter_test,
            liveness,
        }
    }

    /// The receipts of a selector's first binding (later bindings of it share them).
    fn record_runs(&mut self, selector: &str, platforms: &[String], falsifiable_known: bool) {
        if self.bound.contains_key(selector) {
            return;
        }
        self.bound.insert(selector.to_string(), self.runs.len());
        let mut runs = Runs {
            selector: selector.to_string(),
            lines: Vec::new(),
        };
        let per = self.opts.receipts_per_test;
        if per == 0 || self.rng.chance(0.12) {
            self.bump("bindings_never_run");
            self.runs.push(runs);
            return;
        }
        let mut reporting = platforms.to_vec();
        if reporting.len() > 1 && self.rng.chance(0.1) {
            // One declared platform never reports: not-run there.
            reporting.truncate(1);
        }
        // The newest run is mostly within the week, now and then well past it.
        let newest_back = if self.rng.chance(0.9) {
            self.rng.range(HOUR, 140 * HOUR)
        } else {
            self.rng.range(8 * DAY, 40 * DAY)
        };
        for k in 0..per {
            let back = newest_back + 6 * HOUR * (per - 1 - k) as u64 + self.rng.range(0, HOUR);
            let nanos = self.rng.range(0, 1_000_000_000);
            let x = self.rng.unit();
            let result = if x < 0.82 {
                RunResult::Green
            } else if x < 0.96 {
                RunResult::Red
            } else {
                RunResult::Gray
            };
            let falsifiable = falsifiable_known.then(|| self.rng.chance(0.93));
            runs.lines.push(Receipt {
                test: selector.to_string(),
                platform: reporting[k % reporting.len()].clone(),
                commit: self.commit(0.7),
                ran_at: (self.stamp)(back, nanos),
                result,
                falsifiable,
            });
        }
        self.runs.push(runs);
    }

    /// `count` grounds without a test: person re-checks (when allowed), unbound, rejected roads.
    fn untested_grounds(
        &mut self,
        i: usize,
        from: usize,
        count: usize,
        person: bool,
    ) -> Vec<Ground> {
        (from..from + count)
            .map(|g| {
                let claim = self.claim(i, g);
                let x = self.rng.unit();
                if person && x < 0.4 {
                    self.bump("person_checks");
                    let reference = self.rng.pick(&RECHECKS).to_string();
                    Ground {
                        claim,
                        supports: "chosen".into(),
                        check: Some(Check::Person { reference }),
                    }
                } else if x < 0.7 {
                    Ground {
                        claim,
                        supports: "chosen".into(),
                        check: None,
                    }
                } else {
                    self.bump("rejected_roads");
                    Ground {
                        claim,
                        supports: format!("rejected:{}", self.rng.pick(&TOOLS)),
                        check: None,
                    }
                }
            })
            .collect()
    }

    // --- kinds of tick ---------------------------------------------------------------------

    /// A decision written now (`decide`) or carried in from elsewhere (`migrate`).
    fn authored(&mut self, i: usize, tested: bool, imported: bool) -> Tick {
        let decision = self.decision(i);
        let observe = self.observe(i);
        let blame = *self.rng.pick(&PEOPLE);
        let mut t = draft(decision, observe, Vec::new(), blame);
        if imported {
            self.bump("imported");
            t.provenance = Some(proto::vocab::IMPORTED.into());
            if self.rng.chance(0.4) {
                t.authority = Some(proto::vocab::USER_RULED.into());
            }
            let y = self.rng.unit();
            t.source_ref = Some(if y < 0.55 {
                SourceRef::Text(format!("ADR-{:04}", i + 1))
            } else if y < 0.8 {
                SourceRef::Text(format!("#{}", 100 + i))
            } else {
                let mut o = Map::new();
                o.insert("system".into(), "tracker".into());
                o.insert("key".into(), format!("ENG-{}", 10 + i).into());
                SourceRef::Object(o)
            });
        } else {
            let a = self.rng.unit();
            if a < 0.35 {
                t.authority = Some(proto::vocab::USER_RULED.into());
            } else if a < 0.5 {
                t.authority = Some(proto::vocab::AGENT_DISPOSABLE.into());
            }
            if self.rng.chance(0.1) {
                t.source_ref = Some(SourceRef::Text(format!("R{}", 1000 + i)));
            }
        }
        let j = self.rng.unit();
        if tested {
            self.bump("test_bound_ticks");
            // Detect-only jurisdictions (C, D) never carry a test.
            t.jurisdiction = match j {
                j if j < 0.7 => None,
                j if j < 0.85 => Some("A".into()),
                _ => Some("B".into()),
            };
            let n_tests = if self.rng.chance(0.75) { 1 } else { 2 };
            for g in 0..n_tests {
                let harvested = imported && self.rng.chance(0.5);
                let claim = self.claim(i, g);
                let check = self.test_check(i, g, !harvested);
                t.grounds.push(Ground {
                    claim,
                    supports: "chosen".into(),
                    check: Some(check),
                });
            }
            let extra = self.rng.below(3);
            let more = self.untested_grounds(i, n_tests, extra, true);
            t.grounds.extend(more);
            if t.authority.as_deref() == Some(proto::vocab::USER_RULED) && self.rng.chance(0.25) {
                // A tripwire: a test that goes green if the rejected road comes back.
                self.bump("tripwires");
                self.bump("rejected_roads");
                let g = t.grounds.len();
                let claim = self.claim(i, g);
                let supports = format!("rejected:{}", self.rng.pick(&TOOLS));
                let check = self.test_check(i, g, true);
                t.grounds.push(Ground {
                    claim,
                    supports,
                    check: Some(check),
                });
            }
        } else {
            t.jurisdiction = match j {
                j if j < 0.6 => None,
                j if j < 0.7 => Some("A".into()),
                j if j < 0.8 => Some("B".into()),
                j if j < 0.92 => Some("C".into()),
                _ => Some("D".into()),
            };
            let n = if self.rng.chance(0.03) {
                0
            } else {
                1 + self.rng.below(4)
            };
            t.grounds = self.untested_grounds(i, 0, n, true);
        }
        t
    }

    /// An agent's proposal: disposable until a human ratifies it.
    fn proposal(&mut self, i: usize) -> Tick {
        self.bump("proposals");
        let decision = self.decision(i);
        let observe = self.observe(i);
        let n = 1 + self.rng.below(3);
        let grounds = self.untested_grounds(i, 0, n, false);
        let blame = *self.rng.pick(&AGENTS);
        let mut t = draft(decision, observe, grounds, blame);
        t.authority = Some(proto::vocab::AGENT_DISPOSABLE.into());
        t.provenance = Some(proto::vocab::AGENT_PROPOSED.into());
        if self.rng.chance(0.5) {
            t.source_ref = Some(SourceRef::Text(format!("round-{i}")));
        }
        t
    }

    /// A new tick by a person drawn at random, carrying tick `src`'s payload, jurisdiction and
    /// source_ref (what a ratification and a re-tag both start from).
    fn same_payload(&mut self, src: usize) -> Tick {
        let blame = *self.rng.pick(&PEOPLE);
        let src = &self.ticks[src];
        let mut t = draft(
            src.decision.clone(),
            src.observe.clone(),
            src.grounds.clone(),
            blame,
        );
        t.jurisdiction = src.jurisdiction.clone();
        t.source_ref = src.source_ref.clone();
        t
    }

    /// `ratify`: the proposal's payload, by a human, user-ruled, with a `ratifies` edge.
    fn ratification(&mut self, proposal: usize) -> Tick {
        self.bump("ratifications");
        let mut t = self.same_payload(proposal);
        let src = &self.ticks[proposal];
        t.authority = Some(proto::vocab::USER_RULED.into());
        t.ratifies = Some(src.id.clone());
        t
    }

    /// A re-tag: the same payload with the other authority and a `supersedes` edge.
    fn retag(&mut self, target: usize) -> Tick {
        self.bump("retags");
        let mut t = self.same_payload(target);
        let src = &self.ticks[target];
        t.provenance = src.provenance.clone();
        t.authority = Some(
            if src.authority.as_deref() == Some(proto::vocab::USER_RULED) {
                proto::vocab::AGENT_DISPOSABLE
            } else {
                proto::vocab::USER_RULED
            }
            .into(),
        );
        t.supersedes = Some(src.id.clone());
        t
    }

    /// An overturn: a new ruling that replaces the target.
    fn overturn(&mut self, i: usize, target: usize) -> Tick {
        self.bump("overturns");
        let decision = format!("overturns #{target}: {}", self.decision(i));
        let observe = self.observe(i);
        let mut grounds = vec![Ground {
            claim: self.claim(i, 0),
            supports: "chosen".into(),
            check: None,
        }];
        let extra = self.rng.below(2);
        grounds.extend(self.untested_grounds(i, 1, extra, false));
        let blame = *self.rng.pick(&PEOPLE);
        let mut t = draft(decision, observe, grounds, blame);
        if self.rng.chance(0.6) {
            t.authority = Some(proto::vocab::USER_RULED.into());
        }
        t.supersedes = Some(self.ticks[target].id.clone());
        t
    }

    /// A tick still standing that a human might re-tag or overturn (not a proposal).
    fn standing(&mut self) -> Option<usize> {
        if self.ticks.len() <= 10 {
            return None;
        }
        (0..8).find_map(|_| {
            let k = self.rng.below(self.ticks.len());
            (!self.replaced[k] && !self.ticks[k].is_agent_proposed()).then_some(k)
        })
    }

    // --- the chain -------------------------------------------------------------------------

    fn build(&mut self) {
        let n = self.opts.ticks as u64;
        // Spread the chain over up to two years before `now`, at most six hours apart.
        let span = (n * 6 * HOUR).min(730 * DAY);
        for i in 0..self.opts.ticks {
            let tick = if self.rng.chance(self.opts.test_bound) {
                let imported = self.rng.chance(0.15);
                self.authored(i, true, imported)
            } else {
                let x = self.rng.unit();
                let special = if x < 0.02 {
                    if self.unratified.is_empty() {
                        None
                    } else {
                        let k = self.rng.below(self.unratified.len());
                        let p = self.unratified.swap_remove(k);
                        Some(self.ratification(p))
                    }
                } else if x < 0.08 {
                    self.standing().map(|target| {
                        self.replaced[target] = true;
                        if x < 0.06 {
                            self.retag(target)
                        } else {
                            self.overturn(i, target)
                        }
                    })
                } else if x < 0.14 {
                    Some(self.proposal(i))
                } else if x < 0.29 {
                    Some(self.authored(i, false, true))
                } else {
                    None
                };
                match special {
                    Some(t) => t,
                    None => self.authored(i, false, false),
                }
            };
            let back = HOUR + span - span * i as u64 / n;
            let nanos = self.rng.range(0, 1_000_000_000);
            self.append(tick, back, nanos);
        }
    }

    fn append(&mut self, mut t: Tick, secs_back: u64, nanos: u64) {
        t.parent_id = self.ticks.last().map(|p| p.id.clone()).unwrap_or_default();
        t.held_since = (self.stamp)(secs_back, nanos);
        t.id = proto::id::tick_id(&t.decision, &t.observe, &t.grounds, &t.parent_id);
        self.bump("ticks");
        if t.authority.as_deref() == Some(proto::vocab::USER_RULED) {
            self.bump("user_ruled");
        }
        match t.jurisdiction.as_deref() {
            Some("A") => self.bump("jurisdiction_a"),
            Some("B") => self.bump("jurisdiction_b"),
            Some("C") => self.bump("jurisdiction_c"),
            Some("D") => self.bump("jurisdiction_d"),
            _ => {}
        }
        if matches!(t.source_ref, Some(SourceRef::Object(_))) {
            self.bump("source_ref_objects");
        }
        if t.is_agent_proposed() {
            self.unratified.push(self.ticks.len());
        }
        self.ticks.push(t);
        self.replaced.push(false);
    }

    // --- the files -------------------------------------------------------------------------

    fn write(mut self, root: &Path) -> Result<Summary, String> {
        let ev = root.join(".evolving");
        let ticks_dir = ev.join("ticks");
        let fail = |p: &Path, e: std::io::Error| format!("gen_store: writing {}: {e}", p.display());
        for t in &self.ticks {
            let p = ticks_dir.join(&t.id);
            fs::write(&p, t.file_bytes()).map_err(|e| fail(&p, e))?;
        }
        let head = self.ticks.last().map(|t| t.id.clone()).unwrap_or_default();
        let p = ev.join("HEAD");
        fs::write(&p, &head).map_err(|e| fail(&p, e))?;

        let mut files: BTreeMap<String, String> = BTreeMap::new();
        for runs in &self.runs {
            if runs.lines.is_empty() {
                continue;
            }
            let text = files
                .entry(proto::id::receipt_key(&runs.selector))
                .or_default();
            for r in &runs.lines {
                text.push_str(&r.line());
            }
            *self.counts.entry("receipt_lines").or_default() += runs.lines.len();
        }
        let receipts = ev.join("results").join("receipts");
        for (key, text) in &files {
            let p = receipts.join(format!("{key}.jsonl"));
            fs::write(&p, text).map_err(|e| fail(&p, e))?;
        }
        self.counts.insert("receipt_files", files.len());
        self.counts
            .insert("superseded", self.replaced.iter().filter(|r| **r).count());

        let why_selector = self.ticks.iter().rev().find_map(|t| {
            t.grounds.iter().find_map(|g| match &g.check {
                Some(Check::Test { reference, .. }) => Some(reference.clone()),
                _ => None,
            })
        });
        Ok(Summary {
            dir: root.to_path_buf(),
            head,
            genesis: self.ticks[0].id.clone(),
            sample_id: self.ticks[self.ticks.len() / 2].id.clone(),
            why_selector,
            git_head: self.shas.last().cloned().unwrap_or_default(),
            counts: self.counts,
        })
    }
}
