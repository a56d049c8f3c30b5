//! What a command prints, in the order it prints it (stdout and stderr interleaved as upstream
//! does, answer files copied to stdout in place), and its exit code; a usage error; the refusal
//! every verb may end in, plain or `--json`.
//!
//! It must not know any verb's answer: those are the other files of `render/`.

use proto::json::q;
use proto::rpc::{Refusal, Warning};
use serde::Serialize;

/// Which stream a piece of output goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What a command prints, in the order it prints it (the interleaving of stdout and stderr is
/// part of the interface: upstream prints verify's `✗` lines before its count), and its exit
/// code.
#[derive(Debug, Default)]
pub struct Out {
    pub parts: Vec<(Stream, String)>,
    pub code: u8,
    /// Files whose bytes go to stdout as they are (an answer file evd wrote: megabytes that
    /// need not pass through this process's memory), each before the part at its index.
    pub files: Vec<(usize, std::fs::File)>,
}

impl Out {
    pub(super) fn push(&mut self, stream: Stream, s: &str) {
        match self.parts.last_mut() {
            Some((last, text)) if *last == stream => text.push_str(s),
            _ => self.parts.push((stream, s.to_string())),
        }
    }
    /// Raw text on stdout (no newline added).
    pub fn raw(text: String) -> Out {
        let mut out = Out::default();
        out.push(Stream::Stdout, &text);
        out
    }
    /// A usage error: `error: <e>` on stderr, exit 2.
    pub fn usage(e: &str) -> Out {
        let mut out = Out {
            code: 2,
            ..Out::default()
        };
        out.err(format!("error: {e}"));
        out
    }
    pub fn line(&mut self, s: impl AsRef<str>) {
        self.push(Stream::Stdout, &format!("{}\n", s.as_ref()));
    }
    pub fn err(&mut self, s: impl AsRef<str>) {
        self.push(Stream::Stderr, &format!("{}\n", s.as_ref()));
    }
    /// Write every part to its stream, in order.
    /// `file`'s bytes on stdout, after everything pushed so far.
    pub fn stdout_file(&mut self, file: std::fs::File) {
        self.files.push((self.parts.len(), file));
    }

    pub fn emit(&self) {
        use std::io::Write;
        let copy = |at: usize| {
            for (_, f) in self.files.iter().filter(|(i, _)| *i == at) {
                let mut out = std::io::stdout().lock();
                let _ = out.flush();
                let mut f = f;
                let _ = std::io::copy(&mut f, &mut out);
            }
        };
        for (i, (stream, text)) in self.parts.iter().enumerate() {
            copy(i);
            let _ = match stream {
                Stream::Stdout => std::io::stdout().write_all(text.as_bytes()),
                Stream::Stderr => {
                    let _ = std::io::stdout().flush();
                    std::io::stderr().write_all(text.as_bytes())
                }
            };
        }
        copy(self.parts.len());
        let _ = std::io::stdout().flush();
    }
    pub fn warnings(&mut self, w: &[Warning]) {
        for w in w {
            self.err(&w.message);
        }
    }
    /// One compact JSON document on stdout.
    pub fn json<T: Serialize>(&mut self, v: &T) {
        let text = serde_json::to_value(v)
            .map(|v| proto::json::compact(&v))
            .unwrap_or_else(|e| format!("{{\"error\":{}}}", q(&e.to_string())));
        self.line(text);
    }
}

/// A refusal: warnings, then `error: <message>`, exit 1. With `--json`, one JSON object on stdout.
pub fn refusal(r: &Refusal, json: bool) -> Out {
    // A retried write that had been applied already is a success whose words were lost.
    let applied = r.code == proto::rpc::codes::ALREADY_APPLIED;
    let mut out = Out {
        code: if applied { 0 } else { 1 },
        ..Out::default()
    };
    if applied && !json {
        out.warnings(&r.warnings);
        out.err(format!("note: evctl: {}", r.message));
        return out;
    }
    if json {
        out.json(&serde_json::json!({
            "error": {"code": r.code, "reason": r.reason, "message": r.message},
            "warnings": r.warnings,
        }));
    } else {
        out.warnings(&r.warnings);
        out.err(format!("error: {}", r.message));
    }
    out
}
