//! `evctl lsp`: a language server on stdio that shows, in any LSP editor, which decisions guard
//! the file being edited and what their checks read now.
//!
//! Built on `lsp-server` and `lsp-types` (rust-analyzer's crates): a synchronous loop that
//! handles the editor's messages one at a time, in order. Two threads feed it: `watch` (the evd
//! session, the `ev.watch` subscription, `ev.guards` answers) and `commands` (the
//! `workspace/executeCommand` jobs, run one at a time through the same verbs as the command
//! line). Everything the editor sees comes from the last `ev.guards` answer:
//!
//! - diagnostics on every file a current decision's trigger names literally, and on any opened
//!   file a directory or glob trigger covers; one at each span a current decision cites as
//!   evidence, by whether it still holds (`diagnostics`);
//! - a hover listing the decisions that guard the file (`hover`);
//! - code lenses and code actions offering the commands, "cite the selection as evidence" among
//!   them (`commands`).

mod commands;
mod diagnostics;
mod events;
mod hover;
mod transport;
mod watch;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, select, Receiver, Sender, TrySendError};
use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::{
    CodeActionParams, CodeLensParams, Diagnostic, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, ExecuteCommandParams, Hover, HoverContents, HoverParams,
    LogMessageParams, MarkupContent, MarkupKind, MessageType, PublishDiagnosticsParams,
    ShowDocumentParams, ShowMessageParams, Url,
};
use proto::rpc::GuardsResult;
use serde_json::{json, Value};

use crate::grammar::Globals;
use crate::render::Out;
use events::{Config, Event};
use transport::Incoming;

/// Documents the server keeps track of at once (the oldest opened is forgotten first).
const MAX_OPEN: usize = 1_000;
/// Files that carry diagnostics at once.
const MAX_FILES: usize = 10_000;
/// Commands waiting to run, at most.
const MAX_QUEUED: usize = 16;
/// How much of a file is read to place its citations or cite a selection (a citation covers at
/// most evd's limit, and starts before it).
const CITE_READ: u64 = 4 * evd::api::shared::MAX_SPAN;
/// How long a test run from the editor may take, unless `initializationOptions` say otherwise.
const TEST_LIMIT: Duration = Duration::from_secs(600);

/// Serve the editor on stdin/stdout until it says `exit` (or goes away).
pub fn serve(g: &Globals) -> Out {
    let code = match Server::start(g) {
        Ok(code) => code,
        Err(e) => {
            let mut out = Out {
                code: 1,
                ..Out::default()
            };
            out.err(format!("evctl lsp: {e}"));
            return out;
        }
    };
    Out {
        code,
        ..Out::default()
    }
}

struct Server {
    out: Sender<Message>,
    root: PathBuf,
    /// `root`, canonical (editors may name files either way).
    canon: PathBuf,
    guards: Option<Arc<GuardsResult>>,
    /// What each file shows now (only files with diagnostics).
    published: HashMap<Url, Vec<Diagnostic>>,
    /// Open documents inside the store: URI and store-relative path, oldest first.
    open: VecDeque<(Url, String)>,
    jobs: Sender<commands::Job>,
    /// Held so that the watch thread runs as long as the loop does.
    _wake: tokio::sync::mpsc::Sender<()>,
    shutdown: bool,
    show_document: bool,
    lens_refresh: bool,
    next_id: u64,
    last_error: Option<String>,
    too_many_said: bool,
}

fn log_message(kind: MessageType, text: impl Into<String>) -> Message {
    Notification::new(
        "window/logMessage".into(),
        LogMessageParams {
            typ: kind,
            message: text.into(),
        },
    )
    .into()
}

/// A path named in `initialize` (a `file:` URI or a plain path).
fn dir_of(params: &Value) -> Option<PathBuf> {
    let uri = params.get("rootUri").and_then(Value::as_str).or_else(|| {
        params
            .pointer("/workspaceFolders/0/uri")
            .and_then(Value::as_str)
    });
    if let Some(p) = uri
        .and_then(|u| Url::parse(u).ok())
        .and_then(|u| u.to_file_path().ok())
    {
        return Some(p);
    }
    params
        .get("rootPath")
        .and_then(Value::as_str)
        .map(PathBuf::from)
}

fn config_of(params: &Value) -> Config {
    let opts = params.get("initializationOptions");
    Config {
        platform: opts
            .and_then(|o| o.get("platform"))
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .unwrap_or("local")
            .to_string(),
        test_limit: opts
            .and_then(|o| o.get("testTimeoutSecs"))
            .and_then(Value::as_u64)
            .map(Duration::from_secs)
            .unwrap_or(TEST_LIMIT),
    }
}

fn flag(params: &Value, pointer: &str) -> bool {
    params
        .pointer(pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

impl Server {
    fn start(g: &Globals) -> Result<u8, String> {
        let io = transport::stdio().map_err(|e| format!("cannot start: {e}"))?;
        let r = Server::handshake_and_run(g, &io);
        io.finish();
        r
    }

    fn handshake_and_run(g: &Globals, io: &transport::Stdio) -> Result<u8, String> {
        let out = io.outgoing.clone();
        // Before `initialize`, every request is refused as the protocol says.
        let (id, params) = loop {
            match io.incoming.recv() {
                Ok(Incoming::Message(Message::Request(r))) if r.method == "initialize" => {
                    break (r.id, r.params)
                }
                Ok(Incoming::Message(Message::Request(r))) => {
                    let _ = out.send(
                        Response::new_err(
                            r.id,
                            ErrorCode::ServerNotInitialized as i32,
                            "initialize first".into(),
                        )
                        .into(),
                    );
                }
                Ok(Incoming::Message(Message::Notification(n))) if n.method == "exit" => {
                    return Ok(1)
                }
                Ok(Incoming::Bad { id: Some(id), why }) => {
                    let _ = out
                        .send(Response::new_err(id, ErrorCode::InvalidRequest as i32, why).into());
                }
                Ok(Incoming::Closed(None)) | Err(_) => return Ok(1),
                Ok(Incoming::Closed(Some(why))) => return Err(why),
                Ok(_) => {}
            }
        };
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let base = match &g.store {
            Some(s) => crate::context::store_root(Some(s), &cwd, false),
            None => dir_of(&params).unwrap_or(cwd),
        };
        let found = crate::context::find_store(&base);
        let root = found.clone().unwrap_or_else(|| base.clone());
        let config = config_of(&params);
        let caps = json!({
            "capabilities": {
                // Open and close only: no document text is needed.
                "textDocumentSync": {"openClose": true, "change": 0},
                "hoverProvider": true,
                "codeLensProvider": {"resolveProvider": false},
                "codeActionProvider": true,
                "executeCommandProvider": {"commands": commands::ALL},
            },
            "serverInfo": {"name": "evctl", "version": env!("CARGO_PKG_VERSION")},
        });
        out.send(Response::new_ok(id, caps).into())
            .map_err(|_| "the editor went away".to_string())?;
        let _ = out.send(log_message(
            MessageType::INFO,
            match &found {
                Some(r) => format!("evctl lsp: serving the store at {}", r.display()),
                None => format!(
                    "evctl lsp: no .evolving/ store at or above {}: nothing to show until one \
                     is made there (`evctl init`)",
                    base.display()
                ),
            },
        ));

        let (events_tx, events) = bounded::<Event>(64);
        let (wake, wake_rx) = tokio::sync::mpsc::channel::<()>(1);
        let (jobs, jobs_rx) = bounded::<commands::Job>(MAX_QUEUED);
        watch::spawn(root.clone(), events_tx.clone(), wake_rx)
            .map_err(|e| format!("cannot start the watch thread: {e}"))?;
        commands::spawn(root.clone(), config, jobs_rx, events_tx, wake.clone())
            .map_err(|e| format!("cannot start the command thread: {e}"))?;
        let mut server = Server {
            out,
            canon: std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone()),
            root,
            guards: None,
            published: HashMap::new(),
            open: VecDeque::new(),
            jobs,
            _wake: wake,
            shutdown: false,
            show_document: flag(&params, "/capabilities/window/showDocument/support"),
            lens_refresh: flag(&params, "/capabilities/workspace/codeLens/refreshSupport"),
            next_id: 0,
            last_error: None,
            too_many_said: false,
        };
        server.run(&io.incoming, &events)
    }

    fn send(&self, m: impl Into<Message>) {
        let _ = self.out.send(m.into());
    }

    fn notify(&self, method: &str, params: impl serde::Serialize) {
        self.send(Notification::new(method.into(), params));
    }

    fn request(&mut self, method: &str, params: impl serde::Serialize) {
        self.next_id += 1;
        let id = RequestId::from(format!("evctl-{}", self.next_id));
        self.send(Request::new(id, method.into(), params));
    }

    fn reply_err(&self, id: RequestId, code: ErrorCode, msg: impl Into<String>) {
        self.send(Response::new_err(id, code as i32, msg.into()));
    }

    fn run(
        &mut self,
        incoming: &Receiver<Incoming>,
        events: &Receiver<Event>,
    ) -> Result<u8, String> {
        loop {
            select! {
                recv(incoming) -> m => match m {
                    Ok(Incoming::Message(Message::Request(r))) => self.on_request(r),
                    Ok(Incoming::Message(Message::Notification(n))) => {
                        if n.method == "exit" {
                            return Ok(if self.shutdown { 0 } else { 1 });
                        }
                        self.on_notification(n);
                    }
                    Ok(Incoming::Message(Message::Response(_))) => {}
                    Ok(Incoming::Bad { id, why }) => {
                        let why = format!("evctl lsp: a malformed message was ignored: {why}");
                        match id {
                            Some(id) => self.reply_err(id, ErrorCode::InvalidRequest, why),
                            None => self.send(log_message(MessageType::WARNING, why)),
                        }
                    }
                    Ok(Incoming::Closed(None)) | Err(_) => {
                        return Ok(if self.shutdown { 0 } else { 1 })
                    }
                    Ok(Incoming::Closed(Some(why))) => return Err(why),
                },
                recv(events) -> e => match e {
                    Ok(e) => self.on_event(e),
                    Err(_) => return Err("the worker threads stopped".into()),
                },
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // From the editor

    fn on_request(&mut self, r: Request) {
        if self.shutdown {
            return self.reply_err(r.id, ErrorCode::InvalidRequest, "shutting down");
        }
        let id = r.id.clone();
        let result = match r.method.as_str() {
            // The specification allows it once; a second one is an invalid request.
            "initialize" => {
                return self.reply_err(
                    id,
                    ErrorCode::InvalidRequest,
                    "evctl lsp: initialize may only be sent once, and it was already",
                )
            }
            "shutdown" => {
                self.shutdown = true;
                Ok(Value::Null)
            }
            "textDocument/hover" => params::<HoverParams>(r.params)
                .map(|p| self.hover(&p.text_document_position_params.text_document.uri)),
            "textDocument/codeLens" => params::<CodeLensParams>(r.params).map(|p| {
                let lenses = self
                    .rel(&p.text_document.uri)
                    .zip(self.guards.as_deref())
                    .map(|(rel, g)| commands::lenses(g, &rel))
                    .unwrap_or_default();
                json!(lenses)
            }),
            "textDocument/codeAction" => {
                params::<CodeActionParams>(r.params).map(|p| match self.rel(&p.text_document.uri) {
                    Some(rel) => {
                        // The bytes as saved: the server keeps no document text.
                        let span = saved(&self.root, &rel, CITE_READ)
                            .and_then(|t| diagnostics::selection_span(&t, p.range));
                        json!(commands::actions(self.guards.as_deref(), &rel, span))
                    }
                    None => Value::Null,
                })
            }
            "workspace/executeCommand" => match params::<ExecuteCommandParams>(r.params) {
                Ok(p) => return self.execute(id, p),
                Err(e) => Err(e),
            },
            other => {
                return self.reply_err(
                    id,
                    ErrorCode::MethodNotFound,
                    format!("evctl lsp does not handle {other}"),
                )
            }
        };
        match result {
            Ok(v) => self.send(Response::new_ok(id, v)),
            Err(e) => self.reply_err(id, ErrorCode::InvalidParams, e),
        }
    }

    fn execute(&mut self, id: RequestId, p: ExecuteCommandParams) {
        if !commands::ALL.contains(&p.command.as_str()) {
            return self.reply_err(
                id,
                ErrorCode::InvalidParams,
                format!(
                    "unknown command {} (this server runs {})",
                    p.command,
                    commands::ALL.join(", ")
                ),
            );
        }
        let job = commands::Job {
            id: id.clone(),
            command: p.command,
            arg: p.arguments.into_iter().next().unwrap_or(Value::Null),
        };
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.reply_err(
                id,
                ErrorCode::RequestFailed,
                format!("{MAX_QUEUED} commands are waiting already; try again when they are done"),
            ),
            Err(TrySendError::Disconnected(_)) => {
                self.reply_err(id, ErrorCode::InternalError, "the command thread stopped")
            }
        }
    }

    fn on_notification(&mut self, n: Notification) {
        match n.method.as_str() {
            "textDocument/didOpen" => {
                if let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(n.params) {
                    self.opened(p.text_document.uri);
                }
            }
            "textDocument/didClose" => {
                if let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(n.params) {
                    self.closed(&p.text_document.uri);
                }
            }
            _ => {}
        }
    }

    /// The store-relative path of a `file:` URI inside the store.
    fn rel(&self, uri: &Url) -> Option<String> {
        let path = uri.to_file_path().ok()?;
        let inside = |p: &Path| -> Option<String> {
            let r = p
                .strip_prefix(&self.root)
                .or_else(|_| p.strip_prefix(&self.canon))
                .ok()?;
            let s = r.to_str()?;
            (!s.is_empty() && !s.starts_with(".evolving")).then(|| s.to_string())
        };
        inside(&path).or_else(|| inside(&std::fs::canonicalize(&path).ok()?))
    }

    fn opened(&mut self, uri: Url) {
        let Some(rel) = self.rel(&uri) else { return };
        self.open.retain(|(u, _)| *u != uri);
        self.open.push_back((uri, rel));
        while self.open.len() > MAX_OPEN {
            if let Some((old, _)) = self.open.pop_front() {
                self.forget(&old);
            }
        }
        self.publish();
    }

    fn closed(&mut self, uri: &Url) {
        let before = self.open.len();
        self.open.retain(|(u, _)| u != uri);
        if self.open.len() != before {
            self.publish();
        }
    }

    /// Clear what a document no longer tracked shows, unless a trigger names it literally.
    fn forget(&mut self, uri: &Url) {
        let literal = self.rel(uri).is_some_and(|rel| {
            self.guards
                .as_deref()
                .is_some_and(|g| diagnostics::literal_paths(g).contains(&rel))
        });
        if !literal && self.published.remove(uri).is_some() {
            self.publish_file(uri.clone(), Vec::new());
        }
    }

    fn hover(&self, uri: &Url) -> Value {
        let now = evd::api::shared::clock::now();
        let md = self
            .rel(uri)
            .zip(self.guards.as_deref())
            .and_then(|(rel, g)| hover::markdown(g, &rel, now));
        match md {
            None => Value::Null,
            Some(value) => json!(Hover {
                contents: HoverContents::Markup(MarkupContent {
                    kind: MarkupKind::Markdown,
                    value,
                }),
                range: None,
            }),
        }
    }

    // -----------------------------------------------------------------------------------------
    // From the threads

    fn on_event(&mut self, e: Event) {
        match e {
            Event::Guards(Ok(g)) => {
                self.last_error = None;
                self.guards = Some(g);
                self.publish();
                if self.lens_refresh {
                    self.request("workspace/codeLens/refresh", Value::Null);
                }
            }
            Event::Guards(Err(why)) => {
                if self.last_error.as_deref() != Some(&why) {
                    self.send(log_message(
                        MessageType::WARNING,
                        format!("evctl lsp: cannot read the verdicts ({why}); what is shown may be out of date"),
                    ));
                    self.last_error = Some(why);
                }
            }
            Event::Log(kind, text) => self.send(log_message(kind, text)),
            Event::Show(kind, text) => self.notify(
                "window/showMessage",
                ShowMessageParams {
                    typ: kind,
                    message: text,
                },
            ),
            Event::Reply(id, Ok(v)) => self.send(Response::new_ok(id, v)),
            Event::Reply(id, Err((code, msg))) => self.send(Response::new_err(id, code, msg)),
            Event::ShowDocument(path) => {
                let said = format!(
                    "ev: write the decision in {} and save it to record it",
                    path.display()
                );
                match Url::from_file_path(&path) {
                    Ok(uri) if self.show_document => {
                        self.request(
                            "window/showDocument",
                            ShowDocumentParams {
                                uri,
                                external: None,
                                take_focus: Some(true),
                                selection: None,
                            },
                        );
                        self.send(log_message(MessageType::INFO, said));
                    }
                    _ => self.notify(
                        "window/showMessage",
                        ShowMessageParams {
                            typ: MessageType::INFO,
                            message: said,
                        },
                    ),
                }
            }
        }
    }

    fn publish_file(&self, uri: Url, diagnostics: Vec<Diagnostic>) {
        self.notify(
            "textDocument/publishDiagnostics",
            PublishDiagnosticsParams {
                uri,
                diagnostics,
                version: None,
            },
        );
    }

    /// Publish what changed since the last answer: every file a trigger names literally, every
    /// open document a trigger covers; clear the files no longer guarded.
    fn publish(&mut self) {
        let Some(g) = self.guards.clone() else { return };
        let now = evd::api::shared::clock::now();
        let mut files: Vec<(Url, String)> = Vec::new();
        let mut seen: HashSet<Url> = HashSet::new();
        let cited = diagnostics::cited_paths(&g);
        for rel in diagnostics::literal_paths(&g)
            .into_iter()
            .chain(cited.iter().cloned())
        {
            let abs = self.root.join(&rel);
            if !abs.is_file() {
                continue;
            }
            if let Ok(uri) = Url::from_file_path(&abs) {
                if seen.insert(uri.clone()) {
                    files.push((uri, rel));
                }
            }
        }
        for (uri, rel) in &self.open {
            if seen.insert(uri.clone()) {
                files.push((uri.clone(), rel.clone()));
            }
        }
        if files.len() > MAX_FILES {
            if !self.too_many_said {
                self.too_many_said = true;
                self.send(log_message(
                    MessageType::WARNING,
                    format!(
                        "evctl lsp: {} guarded files; diagnostics are shown on the first {MAX_FILES} \
                         and on open documents",
                        files.len()
                    ),
                ));
            }
            // Open documents (at the end) are kept first.
            let opened: Vec<(Url, String)> =
                files.split_off(files.len() - self.open.len().min(files.len()));
            files.truncate(MAX_FILES.saturating_sub(opened.len()));
            files.extend(opened);
        }
        let mut next: HashMap<Url, Vec<Diagnostic>> = HashMap::new();
        for (uri, rel) in files {
            let mut d = diagnostics::for_path(&g, &rel, now);
            if cited.contains(&rel) {
                let text = saved(&self.root, &rel, CITE_READ);
                d.extend(diagnostics::for_evidence(&g, &rel, text.as_deref()));
            }
            if !d.is_empty() {
                next.insert(uri, d);
            }
        }
        let gone: Vec<Url> = self
            .published
            .keys()
            .filter(|u| !next.contains_key(*u))
            .cloned()
            .collect();
        for uri in gone {
            self.publish_file(uri, Vec::new());
        }
        for (uri, d) in &next {
            if self.published.get(uri) != Some(d) {
                self.publish_file(uri.clone(), d.clone());
            }
        }
        self.published = next;
    }
}

/// The first `limit` bytes of the regular file `rel` of the repository at `root`, walked to as
/// evd reads evidence: no link below the root followed.
fn saved(root: &Path, rel: &str, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    // Non-blocking, never through a final link, nothing but a regular file: a FIFO planted
    // where a cited file was never holds the editor up.
    let mut bytes = Vec::new();
    evd::api::shared::beneath::Root::new(root)
        .open_file(Path::new(rel))
        .ok()?
        .take(limit)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// A request's params, or why they do not fit.
fn params<P: serde::de::DeserializeOwned>(v: Value) -> Result<P, String> {
    serde_json::from_value(v).map_err(|e| format!("invalid params: {e}"))
}
