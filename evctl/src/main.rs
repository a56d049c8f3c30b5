//! evctl: ev's verbs, answered by evd (started on demand) or, when the daemon cannot be
//! reached, by the same engine in-process.

mod client;
mod context;
mod evidence;
mod generate;
mod grammar;
mod hook_run;
mod hooks;
mod ledger;
mod lsp;
mod merge_driver;
mod migrate;
mod render;
mod report;
mod session;
mod setup;
mod style;
mod team;
mod verbs;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Command, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use clap_complete::aot::Shell;
use proto::rpc::Refusal;

use crate::grammar::Globals;
use crate::render::Out;
use crate::session::Session;

/// evctl — decision memory for your repository, served live by evd.
///
/// Record a decision with the grounds it rests on (chosen reasons and roads not taken); bind a
/// ground to a falsifiable test with a counter-test; let evd keep the verdicts hot. evctl finds
/// the store by walking up from the working directory to the nearest `.evolving/` (like git
/// finds `.git`), starts evd on first use, and answers in-process when no daemon can be reached
/// (set EVD_NO_DAEMON=1 to force that). The store stays byte-compatible with ev 0.1.27 to 0.1.32.
///
/// Examples:
///   evctl init
///   evctl decide "freeze the retrieval schema for v2" --observe "evaluating retrieval backend" \
///       --assume "team still wants a frozen schema" --revisit "Q3 infra review" \
///       --reject "pgvector: pgvector would lock our schema" --blame "Wang Yu"
///   evctl list
///   evctl show e2b337f53a1f
///   evctl verify
#[derive(Parser)]
#[command(name = "evctl", version, about, long_about, verbatim_doc_comment)]
struct Cli {
    #[command(flatten)]
    globals: GlobalFlags,
    #[command(subcommand)]
    command: Cmd,
}

/// The flags every verb takes, before or after its name.
#[derive(clap::Args)]
struct GlobalFlags {
    /// When to use rich (coloured) output.
    #[arg(long, global = true, value_enum, value_name = "WHEN")]
    color: Option<ColorWhen>,
    /// Plain output regardless of --color.
    #[arg(short = 'p', long, global = true)]
    plain: bool,
    /// Print the answer as one line of JSON (errors too, as {"error": …}).
    #[arg(long, global = true)]
    json: bool,
    /// The store to use: a directory holding .evolving/ (default: the nearest one above the
    /// working directory).
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ColorWhen {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create .evolving/ in the working directory (or --store DIR); a no-op if it exists.
    Init,
    /// Record a decision with its grounds.
    ///
    /// Name the decision, then its grounds: each --assume (a reason it was taken) or --reject
    /// (a road not taken, and why) opens a ground, and the ground flags after it attach to that
    /// ground, such as a test that passes while the claim holds (--assume-test) with one that
    /// turns red if it breaks (--counter-test).
    ///
    /// The counter-test is a negative control: on today's clean tree, where the claim holds, it
    /// must fail, which is what shows the check can flip at all. One that passes there agrees
    /// with the check and proves nothing: `check --run` says so, and the binding reads
    /// `unproven`, never green.
    ///
    /// The flags are read strictly left to right, and each takes exactly the next token as its
    /// value, whatever it looks like: `--observe --dry-run` observes the text "--dry-run". The
    /// global flags (--json, --store, --plain, --color) may stand wherever a flag may.
    ///
    /// Example:
    ///   evctl decide "pin the embedding model to v3" \
    ///       --assume "re-embedding on every release is too slow" \
    ///       --assume-test "cargo test embed_pin" --counter-test "cargo test embed_pin_breaks" \
    ///       --on-platform linux-ci --triggered-by Cargo.toml --surface deps
    #[command(
        verbatim_doc_comment,
        override_usage = "evctl decide \"<DECISION>\" [<FLAG> <VALUE>]...\n       evctl decide --from-git <COMMIT> [<FLAG> <VALUE>]..."
    )]
    Decide {
        /// The decision text, then the flag stream.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Record an agent's proposal: unbound, agent-proposed, awaiting a human.
    ///
    /// The same left-to-right stream as decide, but a proposal carries no check and no
    /// authority: the flags that would bind a test or set an authority are refused anywhere in
    /// the stream. A human raises the proposal to user-ruled with
    /// `evctl ratify <id> --blame <who>`; a check binds later with `evctl guard`.
    ///
    /// Blame defaults to $EV_AGENT_ID, else `agent` (never your git identity). With --source-ref,
    /// proposing the same key again is a no-op that reports the existing proposal; --json prints
    /// the id envelope to cite at ratify.
    ///
    /// Example:
    ///   EV_AGENT_ID=planner-bot evctl propose "shard the queue" --assume "load doubled" \
    ///       --source-ref R42
    #[command(
        verbatim_doc_comment,
        override_usage = "evctl propose \"<DECISION>\" [<FLAG> <VALUE>]...\n       evctl propose --from-git <COMMIT> [<FLAG> <VALUE>]..."
    )]
    Propose {
        /// The decision text, then the flag stream.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Raise an agent proposal to a user-ruled, human-now decision (a named human signs it).
    Ratify {
        /// The proposal's 12-hex id.
        id: String,
        /// The human who ratifies (required, never filled in for you).
        #[arg(long)]
        blame: String,
    },
    /// List the agent proposals awaiting ratification, newest first.
    Pending {
        /// Only proposals with this source_ref (its dedup key, e.g. `R2289`).
        #[arg(long, value_name = "KEY")]
        source_ref: Option<String>,
    },
    /// Bind a test to an unbound ground of HEAD after the fact (writes a child tick).
    ///
    /// The target is the only unbound ground, a ground's claim, or its zero-based index.
    /// A rejected road takes a test only with --authority user-ruled (a tripwire).
    #[command(verbatim_doc_comment)]
    Guard(verbs::GuardArgs),
    /// Replace a prior ruling: re-tag it, or overturn it with a new one.
    ///
    /// Re-tag (no new ruling): copy the decision verbatim and fix a standing tag; only
    /// --authority, --jurisdiction, --provenance and --blame are read, as flat pairs.
    ///
    /// Overturn (a new ruling after the id): a fresh ruling with its own grounds, read as decide
    /// reads its stream; it needs at least one --assume saying why the old ruling no longer
    /// holds.
    ///
    /// Either way the child carries `supersedes <id>`; the old tick stays as history and leaves
    /// list, brief, pending and check.
    #[command(
        verbatim_doc_comment,
        override_usage = "evctl supersede <ID> [--authority|--jurisdiction|--provenance|--blame <VALUE>]...\n       evctl supersede <ID> \"<NEW RULING>\" --assume <WHY> [<FLAG> <VALUE>]..."
    )]
    Supersede {
        /// The id, then an optional new ruling, then the flag stream.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Re-verify decisions a commit made stale: run their tests at HEAD, record them green.
    ///
    /// A decision reads stale once a commit touches a path it guards (its `triggered_by`):
    /// its tests were verified at an older commit. `reverify` runs the bound tests and
    /// counter-tests of this platform at HEAD (a green run already recorded at HEAD is used
    /// as it is), and when each holds — the test passes, the counter-test fails — records the
    /// re-verification as a child tick: the same decision and grounds, verified at HEAD,
    /// superseding the stale one (upstream `ev` reads it green too).
    ///
    /// Refused, with the reason, when a test is red, a counter-test passes, a guarded path has
    /// uncommitted changes, or a platform other than this one has no run at HEAD. Exit 1 when
    /// any decision is left as it was.
    ///
    /// Examples:
    ///   evctl reverify                  # every decision a commit made stale
    ///   evctl reverify 010ceb0a983c     # just this one
    ///   evctl reverify --dry-run        # what it would run and record
    #[command(verbatim_doc_comment)]
    Reverify(verbs::ReverifyArgs),
    /// Evaluate every bound test of the current decisions (optionally running them first).
    ///
    /// evctl check [--run [--platform P]] [--exit-on-red] [--offline] [--attest p1,p2]…
    ///
    /// Verdicts of a test-bound ground:
    ///   green             the latest run on every platform passed (and its counter-test failed)
    ///   red, gray->red    a run failed (gray: an external runner could not say)
    ///   not-run           a platform the binding names has no run yet
    ///   stale             a triggering change landed after the last run, the last run is older
    ///                     than staleness_days, or a commit since verified_at_sha touched what it
    ///                     guards (`evctl reverify` re-verifies it at HEAD)
    ///   unproven          the counter-test agreed with the test: the test proves nothing
    ///   silently-unbound  a change touched what it guards and its test was not selected
    ///   dirty             green, but a guarded file has uncommitted changes (never gates)
    ///   exempt, memo      not this runner's platform; an agent proposal or a detect-only
    ///                     decision (never gate)
    /// Evidence rows (a user-ruled ground citing bytes of a file): drifted (the bytes changed),
    /// out-of-bounds, unreadable, malformed.
    /// With --exit-on-red, red, gray->red, not-run, stale, unproven, silently-unbound and the
    /// evidence rows of user-ruled decisions exit 1. --run executes each selector with `sh -c`
    /// in the repository, here, in your environment, and records a receipt.
    #[command(verbatim_doc_comment)]
    Check(verbs::CheckArgs),
    /// Print one tick's file exactly as stored.
    Show {
        /// The 12-hex tick id.
        id: String,
    },
    /// List every decision in effect (a superseded ruling collapsed into what replaced it).
    List,
    /// Walk the chain from HEAD back to genesis, naming what superseded each replaced tick.
    Log,
    /// Audit the chain: every id == hash(payload), closed schema, lineage, lints.
    Verify {
        /// Recompute the four frozen golden ids instead (needs no store).
        #[arg(long)]
        self_test: bool,
        /// Also re-hash every evidence citation of the current decisions: exit 1 when any
        /// no longer holds (its bytes changed, the file shrank or went away, a marker is not a
        /// citation).
        #[arg(long, conflicts_with = "self_test")]
        evidence: bool,
    },
    /// Find, and with --fix repair, what a hand-resolved or broken store holds.
    ///
    /// It looks for: git's conflict markers in .evolving/HEAD (a merge without evctl's merge
    /// driver), HEAD naming a tick that is not there, a tick whose parent is missing, a tick
    /// file that does not hash to its name, and stray files in ticks/ (`<id>.orig`, editor
    /// backups, directories, symlinks). Without --fix it prints every change it would make and
    /// writes nothing (exit 1 when something is wrong).
    ///
    /// With --fix: HEAD is resolved by the merge driver's rule (the side that moved, else the
    /// greater id; the other side stays a live fork that `evctl log` shows); missing or damaged
    /// tick files are put back from git when it holds a copy that hashes to the id; stray files
    /// are moved to .evolving/results/doctor/<time>/, never deleted; a tick under another name
    /// is renamed to its id. A tick whose parent nothing can give back is left as it is.
    ///
    /// Examples:
    ///   evctl doctor          # what is wrong, and what --fix would do
    ///   evctl doctor --fix    # repair, then `git add .evolving` and commit
    #[command(verbatim_doc_comment)]
    Doctor {
        /// Make the repairs (without it, nothing is written).
        #[arg(long)]
        fix: bool,
    },
    /// Print an evidence marker for a file's bytes as they are now, to put in a ground's text.
    ///
    /// The marker, [evidence:<path>:<b0>-<b1>:<sha256>], names the file (relative to the
    /// repository), a byte span and the sha256 of exactly those bytes; it becomes part of the
    /// claim (and so of the decision's id). evd refuses a claim whose citation does not hold
    /// when it is recorded, and `check` resurfaces the decision when the bytes change.
    ///
    /// Examples:
    ///   evctl cite docs/design.md:12-18
    ///   evctl cite bench/results.csv --bytes 0-512
    ///   evctl decide "keep the queue shallow" --assume "p99 stays under 5 ms $(evctl cite bench/p99.txt)"
    #[command(verbatim_doc_comment)]
    Cite(evidence::CiteArgs),
    /// Bring existing decision history into the store (idempotent; re-runs skip what is there).
    ///
    /// evctl migrate --source <kind>:<path> [--source …] [--jurisdiction-map <path>] [--blame <name>] [--dry-run]
    /// evctl migrate --reconcile --against <kind>:<path>
    /// evctl migrate --bind-check <selector> --on-platform <p>… --triggered-by <t>… --surface <s>… [--verified-at-sha <sha>]
    ///
    /// Source kinds:
    ///   canonical            JSONL, one {"kind":"ev-decision-intake", …} record per line (the
    ///                        strict, format-neutral contract; provenance is required)
    ///   gitlog               `## R<n> <decision>` headers
    ///   to-human, escalation `RESOLVED <key>: <decision>` / `FLAG <key>: <decision>` blocks
    ///   decisions-immutable  `## <n>. <decision>` sections
    /// The extractors turn only `- rejected: <option>: <why>` lines into grounds; prose never.
    ///
    /// Every record needs a key (its source_ref, or a #<n>/R<n> token): a key already in the
    /// store is skipped, so re-running is safe. A refused run writes nothing at all; a real run
    /// appends every new tick in one batch and moves HEAD once.
    ///
    /// Examples:
    ///   evctl migrate --source canonical:decisions.jsonl --blame "Wang Yu" --dry-run
    ///   evctl migrate --source gitlog:CHANGELOG.md --jurisdiction-map buckets.txt --blame "Wang Yu"
    ///   evctl migrate --reconcile --against to-human:to-human.md
    ///   evctl migrate --bind-check "pytest t_schema.py" --on-platform linux-ci \
    ///       --triggered-by schema.sql --surface schema-ddl
    #[command(verbatim_doc_comment)]
    Migrate(migrate::MigrateArgs),
    /// Print each verdict change of the store live, as evd sees it (one line each, or JSON lines
    /// with --json), until interrupted. A receipt appended by CI, a commit touching a trigger,
    /// a new decision: whatever moves a verdict shows up here without another command.
    Watch,
    /// Show the running evd: pid, version, uptime, and the stores it holds.
    Status,
    /// Stop the running evd cleanly.
    Shutdown,
    /// The user-ruled decisions to read first, rulings with rejected roads on top.
    ///
    /// A ruling none of whose grounds carries a test is marked advisory: nothing would catch a
    /// violation, so it is only as good as the reader's attention. A last line counts them.
    ///
    /// --json prints the frozen `ev-brief` contract: one line, keys sorted.
    #[command(verbatim_doc_comment)]
    Brief {
        /// Show at most N (0 = all; default: config brief_limit, else 10).
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
    },
    /// Which live decisions a test selector guards (superseded ones included).
    Why {
        /// The selector, byte for byte as bound.
        #[arg(allow_hyphen_values = true)]
        selector: String,
    },
    /// Which current decisions guard these files, each with the verdict that speaks for it.
    ///
    /// A decision guards a file when a `--triggered-by` path of its tests covers it: the file
    /// itself, a directory above it, or a glob (whose `*` also crosses `/`, as in git).
    /// Without paths, every guarded decision is listed. Paths are read relative to the working
    /// directory and need not exist. Exit 1 when no decision guards them.
    ///
    /// --json gives each decision's grounds, triggers, last runs and roads not taken.
    ///
    /// Examples:
    ///   evctl guards db/schema.sql
    ///   evctl guards $(git diff --name-only)
    ///   evctl --json guards src/
    #[command(verbatim_doc_comment)]
    Guards {
        /// Files or directories (default: all guarded paths).
        paths: Vec<String>,
    },
    /// Write one self-contained HTML page about the store, with pictures: open it in a browser.
    ///
    /// The decisions in effect and their lineage (supersede and ratify edges drawn), each test
    /// ground's verdict over time (green, red, stale, not-run bands, from the event ledger),
    /// calibration (a reliability diagram per agent and model, with the `ledger query
    /// calibration` table), entropy by estimator, routing ROI by tier, the top failure modes,
    /// and every citation with whether it holds. Every figure is one `evctl ledger query` prints.
    /// No script, font or file from elsewhere: it opens from disk, offline. A large store is
    /// summarised (the page says what it left out).
    ///
    /// Examples:
    ///   evctl report                          # writes evctl-report.html here
    ///   evctl report --out /tmp/decisions.html --since 2026-11-01
    #[command(verbatim_doc_comment)]
    Report(report::ReportArgs),
    /// The store's event ledger (results/ledger/events.jsonl): append events, verify it.
    ///
    /// An append-only, hash-chained JSON Lines journal (seed 002's envelope) whose only writer
    /// is evd: events are validated at the door and refused whole, naming the rule they break.
    /// See docs/ledger.md.
    Ledger {
        #[command(subcommand)]
        action: ledger::LedgerAction,
    },
    /// Receipts shared through git: publish this host's, see what came in, choose whom to trust.
    ///
    /// A CI job publishes what it ran (`evctl receipts publish`) as git notes on the commits it
    /// tested; every clone's `git fetch` brings them, and evd takes them in for commits of
    /// HEAD's history. See docs/team.md.
    Receipts {
        #[command(subcommand)]
        action: team::ReceiptsAction,
    },
    /// A remote's side of sharing receipts: `evctl remote setup` makes `git fetch` bring them.
    Remote {
        #[command(subcommand)]
        action: team::RemoteAction,
    },
    /// Re-open one decision: its tags, edges and what each test ground reads now.
    Reopen {
        /// The 12-hex tick id.
        id: String,
    },
    /// Print a shell completion script for every verb and flag, decide's stream included.
    ///
    /// Load it for this shell, or install it where your shell looks:
    ///   source <(evctl completions bash)
    ///   evctl completions bash > ~/.local/share/bash-completion/completions/evctl
    ///   evctl completions zsh > ~/.zfunc/_evctl     # with ~/.zfunc on $fpath, before compinit
    ///   evctl completions fish > ~/.config/fish/completions/evctl.fish
    #[command(verbatim_doc_comment)]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Print the evctl(1) man page, or write one page per verb with --dir.
    ///
    ///   evctl man | man -l -
    ///   evctl man --dir ~/.local/share/man/man1 && man evctl-decide
    #[command(verbatim_doc_comment)]
    Man {
        /// Write evctl.1 and one evctl-<verb>.1 per verb into DIR (created if missing) instead,
        /// printing each path written.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Serve the Language Server Protocol on stdin/stdout, for editors.
    ///
    /// Diagnostics on every file a current decision guards (one per decision: its verdict, who
    /// is on the hook, how old the receipt is), updated live as evd pushes verdict changes; a
    /// hover with the guarding decisions and their roads not taken; code lenses and actions to
    /// check, run a decision's tests (here, in the editor's environment), verify, and record a
    /// decision about a file. Setup for Neovim, Helix and VS Code: docs/editors.md.
    #[command(verbatim_doc_comment)]
    Lsp,
    /// Git hooks that gate commits and pushes on your decisions' checks.
    ///
    /// pre-commit blocks a commit exactly when `evctl check --exit-on-red` would fail, and names
    /// every decision guarding a file you are changing ("you are changing db/schema.sql, which
    /// decision 1f95ec0c16ce guards (green at a245bc4); its check will read stale after this
    /// commit"). pre-push blocks a push that changes files a gating decision guards.
    ///
    /// The hooks go where git looks for them (`git rev-parse --git-path hooks`: core.hooksPath,
    /// linked worktrees and submodules included). A hook already there is never overwritten: it
    /// is moved to <hook>.evctl-chained and run first, and `uninstall` puts it back as it was. With
    /// core.hooksPath inside the work tree (husky: .husky/_), evctl adds one line to the project's
    /// own hook file (.husky/pre-commit) instead, and `uninstall` removes exactly that line.
    ///
    /// A hook never blocks because of evctl's own trouble: without evd it answers in-process;
    /// without evctl on PATH it says so in one line and lets the commit through. Skip the gates
    /// once with `git commit --no-verify` / `git push --no-verify`, or set EVCTL_NO_HOOKS=1.
    ///
    /// Examples:
    ///   evctl hooks install            # the pre-commit gate
    ///   evctl hooks install --all      # pre-commit and pre-push
    ///   evctl hooks status             # which directory git uses, and whose hook is there
    ///   evctl hooks uninstall          # remove evctl's hooks, restoring what was there
    #[command(verbatim_doc_comment)]
    Hooks {
        #[command(subcommand)]
        action: hooks::Action,
    },
    /// What the installed git hooks run (by hand too, e.g. before committing).
    ///
    /// evctl hook pre-commit
    /// evctl hook pre-push <remote> <url>   (git's list of pushed refs on stdin)
    ///
    /// pre-commit reads the staged paths; pre-push reads git's list of pushed refs on stdin.
    /// Exit 1 blocks; anything else, including evctl's own trouble, exits 0.
    #[command(verbatim_doc_comment)]
    Hook(hook_run::HookArgs),
    /// Set up a git repository for evctl: store, agent skill, session brief, pre-commit gate.
    ///
    /// In TARGET (default: the working directory), which must be the top of a git work tree
    /// (holding `.git`):
    ///   1. the store: `evctl init` with staleness_ref = "local-head" (an existing store is kept,
    ///      its config untouched);
    ///   2. the agent skill .claude/skills/ev/SKILL.md: how a coding agent reads the brief,
    ///      records and proposes decisions, and binds tests;
    ///   3. the session-start hook .claude/hooks/ev-brief-sessionstart.sh (runs `evctl brief`),
    ///      wired in .claude/settings.json when that file does not exist yet (an existing one is
    ///      never edited: the snippet to add is printed), and the pre-commit gate through
    ///      `evctl hooks install`.
    ///
    /// Running it again changes nothing that is already in place. --dry-run prints every change
    /// and writes nothing. It ends with what was done and what is left to do by hand.
    ///
    /// Examples:
    ///   evctl setup --dry-run
    ///   evctl setup
    ///   evctl setup ../other-repo
    #[command(verbatim_doc_comment)]
    Setup(setup::SetupArgs),
    /// git's merge driver for `.evolving/HEAD` (what `hooks install` and `setup` register).
    ///
    /// git runs it when both sides of a merge, rebase, cherry-pick or pull changed HEAD: it keeps
    /// one id by a fixed rule — the side that moved, else the greater id —, the same in either
    /// merge order; the other tip stays a live decision in `ticks/`. Anything but one id on each
    /// side is left to git as a conflict.
    #[command(hide = true)]
    MergeDriver(merge_driver::MergeDriverArgs),
}

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let args: Option<Vec<String>> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_str().map(str::to_string))
        .collect();
    let Some(args) = args else {
        eprintln!("error: arguments must be valid UTF-8");
        return ExitCode::from(2);
    };
    // git starts evctl's direct pre-commit hook (a link to evctl) under the hook's name.
    let args = hooks::invoked_as(argv.first().map(OsString::as_os_str), args);
    let argv: Vec<OsString> = argv
        .first()
        .cloned()
        .into_iter()
        .chain(args.iter().map(OsString::from))
        .collect();
    // The pre-commit gate, before anything else is set up: a commit waits for it.
    if let Some(out) = hook_run::quick(&args) {
        out.emit();
        return ExitCode::from(out.code);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = runtime.block_on(run(args, argv));
    out.emit();
    ExitCode::from(out.code)
}

/// A subcommand's long help, for the verbs that read their own stream.
pub fn long_help(verb: &str) -> String {
    let mut cmd = command();
    // Built first, so the usage line names the program: `Usage: evctl decide …`.
    cmd.build();
    cmd.find_subcommand_mut(verb)
        .map(|c| c.render_long_help().to_string())
        .unwrap_or_default()
}

/// A subcommand's usage lines (`Usage: evctl supersede …`), for the usage errors of the verbs
/// that read their own stream.
pub fn usage_of(verb: &str) -> String {
    let mut cmd = command();
    cmd.build();
    cmd.find_subcommand_mut(verb)
        .map(|c| c.render_usage().to_string())
        .unwrap_or_default()
}

/// evctl's whole grammar: the clap definitions plus the stream flags decide, propose and
/// supersede read by hand, so help, man pages and completions show those too.
fn command() -> Command {
    generate::with_stream_flags(Cli::command())
}

/// Parse `argv` with [`command`], exiting with clap's message on a usage error.
fn parse(argv: Vec<OsString>) -> Cli {
    let matches = command().get_matches_from(argv);
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The verbs git hooks and editors call all day, parsed by their own flags alone: building
/// evctl's whole grammar costs more than the answer of a warm daemon. Anything that does not
/// parse cleanly here (`--help`, a typo) goes to the whole grammar, which says it the usual way.
/// `rest` follows the verb; the globals before it were taken already.
fn parse_one(verb: &str, rest: &[String]) -> Option<Cli> {
    fn matches(args: Command, rest: &[String]) -> Option<clap::ArgMatches> {
        let cmd = GlobalFlags::augment_args(args.no_binary_name(true));
        cmd.try_get_matches_from(rest).ok()
    }
    let (command, m) = match verb {
        "check" => {
            let m = matches(verbs::CheckArgs::augment_args(Command::new("check")), rest)?;
            (Cmd::Check(verbs::CheckArgs::from_arg_matches(&m).ok()?), m)
        }
        "hook" => {
            let m = matches(hook_run::HookArgs::augment_args(Command::new("hook")), rest)?;
            (Cmd::Hook(hook_run::HookArgs::from_arg_matches(&m).ok()?), m)
        }
        _ => return None,
    };
    Some(Cli {
        globals: GlobalFlags::from_arg_matches(&m).ok()?,
        command,
    })
}

/// The decide-family verbs read their own stream; everything else goes through clap.
async fn run(args: Vec<String>, argv: Vec<OsString>) -> Out {
    let mut g = Globals::default();
    let lead = match grammar::take_globals(&args, &mut g) {
        Ok(n) => n,
        Err(_) => clap_only(argv),
    };
    let rest = args.get(lead + 1..).unwrap_or_default();
    match args.get(lead).map(String::as_str) {
        Some("decide") => return verbs::decide(rest, g).await,
        Some("propose") => return verbs::propose(rest, g).await,
        Some("supersede") => return verbs::supersede(rest, g).await,
        _ => {}
    }
    let cli = match args.get(lead).and_then(|verb| parse_one(verb, rest)) {
        Some(cli) => cli,
        None => parse(argv),
    };
    let flags = cli.globals;
    let g = Globals {
        color: flags
            .color
            .map(|c| match c {
                ColorWhen::Auto => "auto".into(),
                ColorWhen::Always => "always".into(),
                ColorWhen::Never => "never".into(),
            })
            .or(g.color),
        plain: flags.plain || g.plain,
        json: flags.json || g.json,
        store: flags.store.or(g.store),
    };
    let mut s = Session::new(&g);
    match cli.command {
        Cmd::Init => verbs::init(&mut s).await,
        Cmd::Decide { .. } | Cmd::Propose { .. } | Cmd::Supersede { .. } => {
            // Dispatched above, before clap; reaching here means argv changed under us.
            render::refusal(
                &Refusal::refused("internal", "stream verb was not dispatched"),
                g.json,
            )
        }
        Cmd::Ratify { id, blame } => verbs::ratify(&mut s, id, blame).await,
        Cmd::Pending { source_ref } => verbs::pending(&mut s, &g, source_ref).await,
        Cmd::Guard(a) => verbs::guard(&mut s, a).await,
        Cmd::Migrate(a) => s.migrate(a).await,
        Cmd::Check(a) => verbs::check(&mut s, &g, a).await,
        Cmd::Reverify(a) => verbs::reverify(&mut s, a).await,
        Cmd::Show { id } => verbs::show(&mut s, &id).await,
        Cmd::List => verbs::list(&mut s, &g).await,
        Cmd::Log => verbs::log(&mut s, &g).await,
        Cmd::Verify {
            self_test,
            evidence: false,
        } => verbs::verify(&mut s, self_test).await,
        Cmd::Verify { evidence: true, .. } => evidence::verify_with_evidence(&mut s).await,
        Cmd::Doctor { fix } => verbs::doctor(&mut s, fix).await,
        Cmd::Cite(a) => evidence::cite(&s, &a),
        Cmd::Watch => verbs::watch(&mut s).await,
        Cmd::Status => verbs::status(&g).await,
        Cmd::Shutdown => verbs::shutdown(&g).await,
        Cmd::Brief { limit } => verbs::brief(&mut s, &g, limit).await,
        Cmd::Why { selector } => verbs::why(&mut s, selector).await,
        Cmd::Reopen { id } => verbs::reopen(&mut s, &g, id).await,
        Cmd::Guards { paths } => verbs::guards(&mut s, paths).await,
        Cmd::Ledger { action } => ledger::run(&mut s, action).await,
        Cmd::Report(a) => report::run(&mut s, a).await,
        Cmd::Receipts { action } => team::receipts(&mut s, action).await,
        Cmd::Remote { action } => team::remote(&s, action),
        Cmd::Completions { shell } => generate::completions(command(), shell),
        Cmd::Man { dir } => generate::man(command(), dir, g.json),
        Cmd::Lsp => lsp::serve(&g),
        Cmd::Hooks { action } => hooks::run(&s, action),
        Cmd::Hook(a) => hook_run::run(&mut s, a).await,
        Cmd::Setup(a) => setup::run(&mut s, a).await,
        Cmd::MergeDriver(a) => merge_driver::run(&a),
    }
}

/// Let clap report a usage error in its own words (exit 2).
fn clap_only(argv: Vec<OsString>) -> ! {
    parse(argv);
    std::process::exit(2)
}
