//! A small hand-driven LSP client over a child's stdio, for the `evctl lsp` tests and the bench:
//! frames messages, reads them on a thread, and lets the caller wait for the one it expects.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A running language server and everything it said so far.
pub struct LspClient {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<(Instant, Value)>,
    /// Every message received, with when it arrived, in order.
    pub seen: Vec<(Instant, Value)>,
    next_id: i64,
}

/// Read one frame (`None` at the end of the stream or on a broken frame).
fn read_frame(r: &mut impl BufRead) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse::<usize>().ok();
            }
        }
    }
    let mut body = vec![0u8; len?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

impl LspClient {
    /// Spawn `cmd` (its stdin and stdout become the protocol; stderr is kept as it is set).
    pub fn spawn(mut cmd: Command) -> std::io::Result<LspClient> {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(v) = read_frame(&mut r) {
                if tx.send((Instant::now(), v)).is_err() {
                    break;
                }
            }
        });
        Ok(LspClient {
            child,
            stdin,
            rx,
            seen: Vec::new(),
            next_id: 0,
        })
    }

    /// Write raw bytes to the server (for malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = s.write_all(bytes).and_then(|()| s.flush());
        }
    }

    pub fn send(&mut self, v: &Value) {
        let body = v.to_string();
        let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.send_raw(frame.as_bytes());
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Wait until a message received from now on satisfies `pred`; returns it.
    pub fn wait_for(&mut self, limit: Duration, pred: impl FnMut(&Value) -> bool) -> Option<Value> {
        self.wait_for_at(limit, pred).map(|(_, v)| v)
    }

    /// How many messages were received so far (a mark for [`LspClient::since_or_wait`]).
    pub fn mark(&mut self) -> usize {
        self.drain();
        self.seen.len()
    }

    /// A message received after `mark` that satisfies `pred`, or the next one that does.
    pub fn since_or_wait(
        &mut self,
        mark: usize,
        limit: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Option<Value> {
        self.drain();
        if let Some((_, v)) = self.seen.iter().skip(mark).find(|(_, v)| pred(v)) {
            return Some(v.clone());
        }
        self.wait_for(limit, pred)
    }

    /// Like [`LspClient::wait_for`], also giving when the message arrived.
    pub fn wait_for_at(
        &mut self,
        limit: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Option<(Instant, Value)> {
        let end = Instant::now() + limit;
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            let (at, v) = self.rx.recv_timeout(left).ok()?;
            self.seen.push((at, v.clone()));
            if pred(&v) {
                return Some((at, v));
            }
        }
    }

    /// The response to request `id`.
    pub fn response(&mut self, id: i64, limit: Duration) -> Option<Value> {
        self.wait_for(limit, |v| v["id"] == id && v.get("method").is_none())
    }

    /// A request and its response.
    pub fn call(&mut self, method: &str, params: Value, limit: Duration) -> Option<Value> {
        let id = self.request(method, params);
        self.response(id, limit)
    }

    /// `initialize` with `root` (and `initialized`); returns the server's result.
    pub fn initialize(
        &mut self,
        root: &Path,
        capabilities: Value,
        options: Value,
    ) -> Option<Value> {
        let uri = format!("file://{}", root.display());
        let r = self.call(
            "initialize",
            json!({"processId": null, "rootUri": uri, "capabilities": capabilities,
                   "initializationOptions": options}),
            Duration::from_secs(20),
        )?;
        self.notify("initialized", json!({}));
        Some(r)
    }

    /// Drain what has already arrived, without waiting.
    pub fn drain(&mut self) {
        while let Ok(m) = self.rx.try_recv() {
            self.seen.push(m);
        }
    }

    /// Close stdin and wait (bounded) for the server to exit; its exit code.
    pub fn finish(mut self, limit: Duration) -> Option<i32> {
        self.stdin = None;
        let end = Instant::now() + limit;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's exit, once it ended by itself (after `exit`).
    pub fn exited(&mut self, limit: Duration) -> Option<i32> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for LspClient {
    fn drop(&mut self) {
        self.stdin = None;
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A `file://` URI for a path (the tests' paths need no escaping).
pub fn file_uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// Whether `v` is a `publishDiagnostics` for `uri`.
pub fn diagnostics_for<'v>(v: &'v Value, uri: &str) -> Option<&'v Vec<Value>> {
    (v["method"] == "textDocument/publishDiagnostics" && v["params"]["uri"] == uri)
        .then(|| v["params"]["diagnostics"].as_array())
        .flatten()
}
