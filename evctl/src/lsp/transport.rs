//! The language server's stdio: LSP's framing (`Content-Length` headers, a blank line, a JSON
//! body) read by one thread and written by another, each feeding a bounded channel.
//!
//! Writing is lsp-server's own (`Message::write`). Reading is done here rather than by
//! lsp-server's stdio transport, which allocates whatever `Content-Length` a client announces and
//! stops the connection at the first body it cannot parse: here a message is at most
//! [`MAX_MESSAGE`] bytes (a larger one is skipped unread), a header line at most
//! [`MAX_HEADER_LINE`], and a body that is not a JSON-RPC message becomes [`Incoming::Bad`],
//! which the loop answers with an error when it can find the request's id.

use std::io::{self, BufRead, Read, Write};
use std::thread;

use crossbeam_channel::{bounded, Receiver, Sender};
use lsp_server::{Message, RequestId};

/// The largest message read (an opened document travels whole in `didOpen`).
pub const MAX_MESSAGE: usize = 64 << 20;
/// The longest header line.
pub const MAX_HEADER_LINE: usize = 8 << 10;

/// What the reader hands the loop.
#[derive(Debug)]
pub enum Incoming {
    Message(Message),
    /// A frame that is not a usable message: why, and the request id when one could be read.
    Bad {
        id: Option<RequestId>,
        why: String,
    },
    /// The input ended, or its framing was lost (nothing after can be trusted): why, if not a
    /// clean end.
    Closed(Option<String>),
}

/// The two channels, and the threads behind them.
pub struct Stdio {
    pub incoming: Receiver<Incoming>,
    pub outgoing: Sender<Message>,
    writer: thread::JoinHandle<()>,
}

impl Stdio {
    /// Drop the sender and wait until everything queued was written.
    pub fn finish(self) {
        drop(self.outgoing);
        let _ = self.writer.join();
    }
}

/// Start reading stdin and writing stdout.
pub fn stdio() -> io::Result<Stdio> {
    let (in_tx, incoming) = bounded::<Incoming>(64);
    let (outgoing, out_rx) = bounded::<Message>(256);
    thread::Builder::new()
        .name("lsp-read".into())
        .spawn(move || {
            let stdin = io::stdin();
            read_loop(&mut stdin.lock(), &in_tx);
        })?;
    let writer = thread::Builder::new()
        .name("lsp-write".into())
        .spawn(move || {
            let stdout = io::stdout();
            for msg in out_rx {
                // Locked per message only: nothing else may block on stdout's lock meanwhile.
                let mut out = stdout.lock();
                if msg.write(&mut out).and_then(|()| out.flush()).is_err() {
                    break; // the client went away
                }
            }
        })?;
    Ok(Stdio {
        incoming,
        outgoing,
        writer,
    })
}

/// Read frames until the input ends or the loop stops listening.
pub fn read_loop(input: &mut impl BufRead, tx: &Sender<Incoming>) {
    loop {
        let item = match read_frame(input) {
            Ok(None) => Incoming::Closed(None),
            Ok(Some(Frame::Body(body))) => parse(&body),
            Ok(Some(Frame::Skipped(len))) => Incoming::Bad {
                id: None,
                why: format!(
                    "a message of {len} bytes was skipped (at most {MAX_MESSAGE} are read)"
                ),
            },
            Err(e) => Incoming::Closed(Some(e.to_string())),
        };
        let last = matches!(item, Incoming::Closed(_));
        if tx.send(item).is_err() || last {
            return;
        }
    }
}

enum Frame {
    Body(Vec<u8>),
    Skipped(usize),
}

/// One frame: `None` at a clean end of input (before any header).
fn read_frame(input: &mut impl BufRead) -> io::Result<Option<Frame>> {
    let mut length: Option<usize> = None;
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        let n = input
            .by_ref()
            .take(MAX_HEADER_LINE as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            if first {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the input ended inside a header",
            ));
        }
        first = false;
        if !line.ends_with(b"\r\n") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a header line is not CRLF-terminated or is too long",
            ));
        }
        let text = String::from_utf8_lossy(&line[..line.len() - 2]);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("malformed header {text:?}"),
            ));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let v = value.trim().parse::<usize>().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad Content-Length {:?}", value.trim()),
                )
            })?;
            length = Some(v);
        }
    }
    let Some(len) = length else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a message without Content-Length",
        ));
    };
    if len > MAX_MESSAGE {
        let skipped = io::copy(&mut input.by_ref().take(len as u64), &mut io::sink())?;
        if skipped < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the input ended inside a message",
            ));
        }
        return Ok(Some(Frame::Skipped(len)));
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body)?;
    Ok(Some(Frame::Body(body)))
}

/// A body as a message, or why it is not one (with the request's id when it has one).
fn parse(body: &[u8]) -> Incoming {
    let value: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Bad {
                id: None,
                why: format!("not JSON: {e}"),
            }
        }
    };
    let id = value
        .get("id")
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    // An id with neither a method nor a result or error is no response: an invalid request,
    // answered as one (a response would be ignored, and its sender left waiting).
    let member = |k: &str| value.get(k).is_some();
    if id.is_some() && !member("method") && !member("result") && !member("error") {
        return Incoming::Bad {
            id,
            why: "a request without a method".into(),
        };
    }
    match serde_json::from_value::<Message>(value) {
        Ok(m) => Incoming::Message(m),
        Err(e) => Incoming::Bad {
            // Only a request is answered: a malformed response has an id too, and answering it
            // would start a loop.
            id: id.filter(|_| std::str::from_utf8(body).is_ok_and(|t| t.contains("\"method\""))),
            why: format!("not a JSON-RPC message: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Incoming> {
        let (tx, rx) = bounded(16);
        read_loop(&mut io::Cursor::new(input.to_vec()), &tx);
        drop(tx);
        rx.iter().collect()
    }

    fn framed(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    #[test]
    fn messages_are_read_in_order_and_the_end_is_clean() {
        let input = framed(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#)
            + &framed(r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#);
        let got = frames(input.as_bytes());
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            matches!(&got[0], Incoming::Message(Message::Request(r)) if r.method == "initialize")
        );
        assert!(matches!(
            &got[1],
            Incoming::Message(Message::Notification(_))
        ));
        assert!(matches!(&got[2], Incoming::Closed(None)));
    }

    #[test]
    fn a_bad_body_is_reported_with_its_id_and_reading_goes_on() {
        let input = framed(r#"{"jsonrpc":"2.0","id":7,"method":5}"#)
            + &framed("{not json")
            + &framed(r#"{"jsonrpc":"2.0","method":"exit"}"#);
        let got = frames(input.as_bytes());
        assert!(
            matches!(&got[0], Incoming::Bad { id: Some(id), .. } if *id == RequestId::from(7)),
            "{got:?}"
        );
        assert!(matches!(&got[1], Incoming::Bad { id: None, .. }), "{got:?}");
        assert!(
            matches!(&got[2], Incoming::Message(Message::Notification(n)) if n.method == "exit")
        );
    }

    #[test]
    fn an_oversized_message_is_skipped_unread() {
        let big = MAX_MESSAGE + 10;
        let mut input = format!("Content-Length: {big}\r\n\r\n").into_bytes();
        input.extend(std::iter::repeat_n(b' ', big));
        input.extend(framed(r#"{"jsonrpc":"2.0","method":"exit"}"#).bytes());
        let got = frames(&input);
        assert!(matches!(&got[0], Incoming::Bad { id: None, why } if why.contains("skipped")));
        assert!(matches!(&got[1], Incoming::Message(_)), "{got:?}");
    }

    #[test]
    fn lost_framing_closes_with_a_reason() {
        let got = frames(b"Content-Length: x\r\n\r\n{}");
        assert!(matches!(&got[0], Incoming::Closed(Some(why)) if why.contains("Content-Length")));
        let long = vec![b'a'; MAX_HEADER_LINE + 5];
        let got = frames(&long);
        assert!(matches!(&got[0], Incoming::Closed(Some(_))), "{got:?}");
        let got = frames(b"Content-Length: 10\r\n\r\n{}");
        assert!(matches!(&got[0], Incoming::Closed(Some(_))), "{got:?}");
    }
}
