//! evctl: ev's verbs, answered by evd (started on demand) or, when the daemon cannot be
//! reached, by the same engine in-process.

mod client;
mod context;
mod grammar;
mod migrate;
mod render;
mod style;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use evd::store::Store;
use evd::{paths, verbs};
use jsonrpsee::core::client::{Client, Error as ClientError};
use proto::rpc::{
    codes, Context, DecideRequest, EvApiClient, FromGit, IdRequest, Refusal, StoreRequest,
    VerifyRequest,
};

use crate::grammar::Globals;
use crate::render::Out;
use crate::style::Style;

/// evctl — decision memory for your repository, served live by evd.
///
/// Record a decision with the grounds it rests on (chosen reasons and roads not taken); bind a
/// ground to a falsifiable test with a counter-test; let evd keep the verdicts hot. evctl finds
/// the store by walking up from the working directory to the nearest `.evolving/` (like git
/// finds `.git`), starts evd on first use, and answers in-process when no daemon can be reached
/// (set EVD_NO_DAEMON=1 to force that). The store stays byte-compatible with ev 0.1.27.
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
    #[command(subcommand)]
    command: Cmd,
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
    /// evctl decide "<decision>" [<flag> <value>]…
    /// evctl decide --from-git <commit> [<flag> <value>]…
    ///
    /// The flags are read strictly left to right; each takes exactly the next token as its value.
    ///
    /// Decision-level (anywhere; a repeat overwrites):
    ///   --observe <text>           the situation you observed
    ///   --blame <name>             who is on the hook (default: git config user.name)
    ///   --authority <v>            user-ruled | agent-disposable
    ///   --jurisdiction <v>         A | B (may gate) or C | D (detect-only, never gates)
    ///   --source-ref <key>         an opaque id from your tracker (e.g. R2289, #555)
    ///   --verified-at-sha <sha>    the commit tests were verified at (default: git HEAD)
    ///   --from-git <commit>        take the decision text and blame from a commit
    ///   --dry-run                  validate and print the id, write nothing
    ///
    /// Ground-opening (each opens a new ground):
    ///   --assume <claim>           a reason for the decision taken
    ///   --reject "<option>: <why>" a road not taken, and why
    ///
    /// Ground-level (attach to the latest --assume/--reject):
    ///   --revisit <when>           a human re-check (chosen grounds only)
    ///   --assume-test <selector>   a test that passes while the claim holds
    ///   --counter-test <selector>  a test that flips red if the claim breaks (required)
    ///   --on-platform <p>          where the test must keep running (repeatable)
    ///   --triggered-by <path>      a path whose change makes the last run stale (repeatable)
    ///   --surface <s>              what the test guards (repeatable)
    #[command(verbatim_doc_comment)]
    Decide {
        /// The decision text, then the flag stream.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Print one tick's file exactly as stored.
    Show {
        /// The 12-hex tick id.
        id: String,
    },
    /// List the current decisions (superseded and duplicate lineage collapsed).
    List,
    /// Walk the chain from HEAD back to genesis.
    Log,
    /// Audit the chain: every id == hash(payload), closed schema, lineage, lints.
    Verify {
        /// Recompute the four frozen golden ids instead (needs no store).
        #[arg(long)]
        self_test: bool,
    },
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
    /// Show the running evd: pid, version, uptime, and the stores it holds.
    Status,
    /// Stop the running evd cleanly.
    Shutdown,
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
    use std::io::Write;
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    ExitCode::from(out.code)
}

/// The decide-family verbs read their own stream; everything else goes through clap.
async fn run(args: Vec<String>, argv: Vec<OsString>) -> Out {
    let mut g = Globals::default();
    let lead = match grammar::take_globals(&args, &mut g) {
        Ok(n) => n,
        Err(_) => clap_only(argv),
    };
    if args.get(lead).map(String::as_str) == Some("decide") {
        return decide(&args[lead + 1..], g).await;
    }
    let cli = Cli::parse_from(argv);
    let g = Globals {
        color: cli.color.map(|c| match c {
            ColorWhen::Auto => "auto".into(),
            ColorWhen::Always => "always".into(),
            ColorWhen::Never => "never".into(),
        }),
        plain: cli.plain,
        json: cli.json,
        store: cli.store,
    };
    let mut session = Session::new(&g);
    match cli.command {
        Cmd::Init => session.init().await,
        Cmd::Decide { .. } => unreachable_decide(),
        Cmd::Show { id } => session.show(&id).await,
        Cmd::List => session.list(&g).await,
        Cmd::Log => session.log(&g).await,
        Cmd::Verify { self_test } => session.verify(self_test).await,
        Cmd::Migrate(a) => session.migrate(a).await,
        Cmd::Status => status(&g).await,
        Cmd::Shutdown => shutdown(&g).await,
    }
}

/// Let clap report a usage error in its own words (exit 2).
fn clap_only(argv: Vec<OsString>) -> ! {
    Cli::parse_from(argv);
    std::process::exit(2)
}

fn unreachable_decide() -> Out {
    // `decide` is dispatched before clap; reaching here means argv changed under us.
    render::refusal(
        &Refusal::refused("internal", "decide was not dispatched"),
        false,
    )
}

/// Where a verb is answered.
struct Session {
    cwd: PathBuf,
    explicit_store: Option<String>,
    json: bool,
    no_daemon: bool,
    rt_dir: PathBuf,
    conn: Option<client::Conn>,
    unreachable: Option<String>,
}

fn unavailable(e: &ClientError) -> bool {
    !matches!(e, ClientError::Call(_))
}

impl Session {
    fn new(g: &Globals) -> Session {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Session {
            cwd,
            explicit_store: g.store.clone(),
            json: g.json,
            no_daemon: std::env::var("EVD_NO_DAEMON").is_ok_and(|v| !v.is_empty() && v != "0"),
            rt_dir: paths::runtime_dir(),
            conn: None,
            unreachable: None,
        }
    }

    fn root(&self, walk_up: bool) -> PathBuf {
        context::store_root(self.explicit_store.as_deref(), &self.cwd, walk_up)
    }

    fn context(&self, walk_up: bool, needs: context::Needs) -> Context {
        context::build(&self.root(walk_up), &self.cwd, needs)
    }

    /// The daemon, connected (and started) on first use; `None` when it cannot be reached.
    async fn daemon(&mut self) -> Option<Arc<Client>> {
        if self.no_daemon || self.unreachable.is_some() {
            return None;
        }
        if self.conn.is_none() {
            match client::connect_or_start(&self.rt_dir).await {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    if std::env::var_os("EVCTL_DEBUG").is_some() {
                        eprintln!("evctl: evd unreachable ({e}); answering in-process");
                    }
                    self.unreachable = Some(e);
                    return None;
                }
            }
        }
        self.conn.as_ref().map(|c| Arc::clone(&c.client))
    }

    /// Call the daemon. `None`: no daemon could be reached. A daemon that answers "stopping"
    /// did not run the request, so it is retried once against the next daemon.
    async fn rpc<R, Fut>(
        &mut self,
        call: impl Fn(Arc<Client>) -> Fut,
    ) -> Option<Result<R, ClientError>>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        for attempt in 0..2 {
            let c = self.daemon().await?;
            let r = call(c).await;
            let stopping = matches!(&r, Err(ClientError::Call(e)) if e.code() == codes::STOPPING);
            if stopping && attempt == 0 {
                self.conn = None;
                client::wait_daemon_gone(&self.rt_dir).await;
                continue;
            }
            return Some(r);
        }
        None
    }

    /// A read: the daemon's answer, or the same engine in-process when it cannot be reached.
    async fn read<R, Fut>(
        &mut self,
        call: impl Fn(Arc<Client>) -> Fut,
        local: impl FnOnce() -> Result<R, Refusal>,
    ) -> Result<R, Refusal>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        match self.rpc(call).await {
            Some(Err(e)) if unavailable(&e) => local(),
            Some(r) => r.map_err(call_error),
            None => local(),
        }
    }

    /// A write: the daemon's answer; in-process (under the store lock) only when no daemon
    /// could be reached at all. A write whose answer was lost is reported, never retried.
    async fn write<R, Fut>(
        &mut self,
        call: impl Fn(Arc<Client>) -> Fut,
        local: impl FnOnce() -> Result<R, Refusal>,
    ) -> Result<R, Refusal>
    where
        Fut: std::future::Future<Output = Result<R, ClientError>>,
    {
        match self.rpc(call).await {
            Some(r) => r.map_err(call_error),
            None => local(),
        }
    }

    fn finish<T>(&self, r: Result<T, Refusal>, render: impl FnOnce(&T) -> Out) -> Out {
        match r {
            Ok(v) => render(&v),
            Err(e) => render::refusal(&e, self.json),
        }
    }

    async fn init(&mut self) -> Out {
        let ctx = self.context(false, context::Needs::default());
        let req = StoreRequest {
            context: ctx.clone(),
        };
        let r = self
            .write(
                |c| {
                    let req = req.clone();
                    async move { c.init(req).await }
                },
                || local_write(&ctx, verbs::init),
            )
            .await;
        let json = self.json;
        self.finish(r, |v| render::init(v, json))
    }

    async fn show(&mut self, id: &str) -> Out {
        let ctx = self.context(true, context::Needs::default());
        let req = IdRequest {
            context: ctx.clone(),
            id: id.to_string(),
        };
        let r = self
            .read(
                |c| {
                    let req = req.clone();
                    async move { c.show(req).await }
                },
                || local_read(&ctx, |s| verbs::show(s, id)),
            )
            .await;
        let json = self.json;
        self.finish(r, |v| {
            let mut out = Out::default();
            if json {
                out.json(v);
            } else {
                out.line(&v.raw);
            }
            out
        })
    }

    async fn list(&mut self, g: &Globals) -> Out {
        let ctx = self.context(true, context::Needs::default());
        let req = StoreRequest {
            context: ctx.clone(),
        };
        let r = self
            .read(
                |c| {
                    let req = req.clone();
                    async move { c.list(req).await }
                },
                || local_read(&ctx, verbs::list),
            )
            .await;
        let style = Style::detect(g.color.as_deref(), g.plain);
        let json = self.json;
        self.finish(r, |v| render::list(v, style, json))
    }

    async fn log(&mut self, g: &Globals) -> Out {
        let ctx = self.context(true, context::Needs::default());
        let req = StoreRequest {
            context: ctx.clone(),
        };
        let r = self
            .read(
                |c| {
                    let req = req.clone();
                    async move { c.log(req).await }
                },
                || local_read(&ctx, verbs::log),
            )
            .await;
        let style = Style::detect(g.color.as_deref(), g.plain);
        let json = self.json;
        self.finish(r, |v| render::log(v, style, json))
    }

    async fn verify(&mut self, self_test: bool) -> Out {
        let json = self.json;
        if self_test {
            // Pure computation: no store, no daemon needed.
            return render::verify(&verbs::self_test(), json);
        }
        let ctx = self.context(true, context::Needs::default());
        let req = VerifyRequest {
            context: ctx.clone(),
            self_test: false,
        };
        let r = self
            .read(
                |c| {
                    let req = req.clone();
                    async move { c.verify(req).await }
                },
                || local_read(&ctx, |s| verbs::verify(s, false)),
            )
            .await;
        self.finish(r, |v| render::verify(v, json))
    }
}

fn call_error(e: ClientError) -> Refusal {
    match e {
        ClientError::Call(obj) => Refusal::from_error_object(&obj),
        other => Refusal::new(
            codes::IO,
            "daemon_unreachable",
            format!("evd did not answer: {other}"),
        ),
    }
}

/// Open the named store in this process, the same way the daemon resolves it.
fn local_store(ctx: &Context) -> Result<Store, Refusal> {
    Ok(Store::new(evd::registry::resolve_root(ctx)?))
}

fn local_read<R>(
    ctx: &Context,
    op: impl FnOnce(&mut Store) -> Result<R, Refusal>,
) -> Result<R, Refusal> {
    let mut store = local_store(ctx)?;
    op(&mut store)
}

/// A write without the daemon: take the store lock for the duration, like the daemon would.
fn local_write<R>(
    ctx: &Context,
    op: impl FnOnce(&mut Store) -> Result<R, Refusal>,
) -> Result<R, Refusal> {
    let mut store = local_store(ctx)?;
    if store.exists()? {
        store.acquire("evctl").map_err(|mut r| {
            if r.code == codes::LOCKED {
                r.message.push_str(
                    " — write through it (unset EVD_NO_DAEMON), or stop it with `evctl shutdown`",
                );
            }
            r
        })?;
    }
    op(&mut store)
}

async fn decide(tokens: &[String], mut g: Globals) -> Out {
    if matches!(
        tokens.first().map(String::as_str),
        Some("-h") | Some("--help")
    ) {
        let mut cmd = Cli::command();
        let help = cmd
            .find_subcommand_mut("decide")
            .map(|c| c.render_long_help().to_string())
            .unwrap_or_default();
        return Out {
            stdout: help,
            ..Out::default()
        };
    }
    let (positional, stream) = match grammar::split_positional(tokens, &mut g) {
        Ok(v) => v,
        Err(e) => {
            return Out {
                stderr: format!("error: {e}\n"),
                code: 2,
                ..Out::default()
            }
        }
    };
    let walk = match grammar::walk(positional, &stream, &["--dry-run", "--json"]) {
        Ok(w) => w,
        Err(e) => return render::refusal(&Refusal::refused("walk", e), g.json),
    };
    g.json |= walk.json;
    let mut session = Session::new(&g);
    let needs_head =
        walk.verified_at_sha.is_none() && walk.grounds.iter().any(|gr| gr.test_ref.is_some());
    let ctx = session.context(
        true,
        context::Needs {
            user_name: walk.blame.is_none(),
            head: needs_head,
            upstream: false,
        },
    );
    let root = PathBuf::from(&ctx.store);
    let from_git = walk.from_git.as_ref().map(|rev| FromGit {
        rev: rev.clone(),
        envelope: context::commit_envelope(&root, rev),
    });
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
        dry_run: walk.dry_run,
    };
    let r = session
        .write(
            |c| {
                let req = req.clone();
                async move { c.decide(req).await }
            },
            || local_write(&ctx, |s| verbs::decide(s, &req)),
        )
        .await;
    let json = g.json;
    session.finish(r, |v| render::decide(v, json))
}

async fn status(g: &Globals) -> Out {
    let rt = paths::runtime_dir();
    match client::connect_existing(&rt).await {
        Ok(conn) => match conn.client.status().await {
            Ok(s) => render::status(&s, g.json),
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
    if json {
        out.json(&serde_json::json!({"running": false, "socket": sock.display().to_string(), "detail": why}));
    } else {
        out.line(format!("evd is not running (socket {})", sock.display()));
    }
    out
}

async fn shutdown(g: &Globals) -> Out {
    let rt = paths::runtime_dir();
    match client::connect_existing(&rt).await {
        Ok(conn) => {
            let pid = conn.hello.pid;
            match conn.client.shutdown().await {
                Ok(_) => {
                    let mut out = Out::default();
                    if g.json {
                        out.json(&serde_json::json!({"stopped": true, "pid": pid}));
                    } else {
                        out.line(format!("stopped evd pid {pid}"));
                    }
                    out
                }
                Err(e) => render::refusal(&call_error(e), g.json),
            }
        }
        Err(e) => not_running(&rt, &e, g.json, 0),
    }
}
