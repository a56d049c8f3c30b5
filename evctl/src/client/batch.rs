//! One blocking exchange with a daemon that is already running, for a caller that pays for every
//! fraction of a millisecond (the pre-commit gate, which a `git commit` waits for): a plain
//! HTTP/1.1 POST over the private socket carrying one JSON-RPC batch, `ev.hello` and one read,
//! answered in one round trip. No async runtime, no WebSocket handshake.
//!
//! It must not start, replace or wait for a daemon, and must not be used for a write: when none
//! listens, or the hello says the daemon is not one this evctl may use (another protocol or
//! build), it answers `Ok(None)` and the caller takes the usual way ([`super::connect_and_call`]
//! through the session), which starts or replaces the daemon and asks again. The read's answer
//! from an unusable daemon is dropped unread.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use evd::api::shared::paths;
use jsonrpsee::types::ErrorObjectOwned;
use proto::rpc::{Hello, PROTOCOL_VERSION};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The largest answer read (evd's own limit on what it sends).
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// The most an answer's status line and headers may take.
const MAX_HEAD: usize = 16 * 1024;

/// Ids of the two calls in the batch.
const HELLO_ID: u64 = 0;
const CALL_ID: u64 = 1;

#[derive(Serialize)]
struct Call<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: [&'a P; 1],
}

/// One reply of the batch, as JSON-RPC 2.0 writes it; its result is read where it lies.
#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(default)]
    id: Option<u64>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: i32,
    message: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
}

impl ErrorBody {
    fn into_object(self) -> ErrorObjectOwned {
        ErrorObjectOwned::owned(self.code, self.message, self.data)
    }
}

/// The daemon's hello and its answer to `method(params)`, both sent at once over a fresh
/// connection. `Ok(None)`: no daemon listens at `rt`, or its hello says this evctl may not use
/// it. `Err`: a daemon took the connection and its answer did not come within `wait`, or could
/// not be read; the caller decides what that means (the usual way says it best).
#[allow(clippy::type_complexity)]
pub fn hello_and_read<P: Serialize, R: DeserializeOwned>(
    rt: &Path,
    method: &str,
    params: &P,
    wait: Duration,
) -> Result<Option<(Hello, Result<R, ErrorObjectOwned>)>, String> {
    let sock = paths::socket_path(rt);
    if paths::check_socket_owner(&sock).is_err() {
        return Ok(None);
    }
    let Ok(mut stream) = UnixStream::connect(&sock) else {
        return Ok(None);
    };
    let want = super::wanted_build(rt);
    let hello = super::hello_request(want.as_deref().unwrap_or(""));
    let body = serde_json::to_vec(&(
        Call {
            jsonrpc: "2.0",
            id: HELLO_ID,
            method: "ev.hello",
            params: [&hello],
        },
        Call {
            jsonrpc: "2.0",
            id: CALL_ID,
            method,
            params: [params],
        },
    ))
    .map_err(|e| format!("cannot encode the request: {e}"))?;
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let _ = stream.set_write_timeout(Some(wait));
    let _ = stream.set_read_timeout(Some(wait));
    stream
        .write_all(&request)
        .map_err(|e| format!("cannot send to evd: {e}"))?;
    let answer = read_answer(&mut stream)?;
    let mut replies: Vec<Reply> = serde_json::from_slice(&answer)
        .map_err(|e| format!("evd's answer could not be read ({e})"))?;
    let mut take = |id: u64| {
        replies
            .iter()
            .position(|r| r.id == Some(id))
            .map(|i| replies.swap_remove(i))
            .ok_or_else(|| format!("evd's answer has no reply {id}"))
    };
    let h = take(HELLO_ID)?;
    let h: Hello = match (h.result, h.error) {
        (Some(v), _) => serde_json::from_str(v.get())
            .map_err(|e| format!("evd's hello could not be read ({e})"))?,
        // A daemon that refuses our hello is not one we may use.
        _ => return Ok(None),
    };
    if h.protocol != PROTOCOL_VERSION || (want.is_some() && !h.compatible) {
        return Ok(None);
    }
    let r = take(CALL_ID)?;
    let r = match (r.result, r.error) {
        (_, Some(e)) => Err(e.into_object()),
        (Some(v), None) => Ok(serde_json::from_str(v.get())
            .map_err(|e| format!("evd's answer could not be read ({e})"))?),
        (None, None) => return Err("evd's answer is neither a result nor an error".into()),
    };
    Ok(Some((h, r)))
}

/// The body of the HTTP answer on `stream` (status 200, its length given), read whole.
fn read_answer(stream: &mut UnixStream) -> Result<Vec<u8>, String> {
    let mut buf = Vec::with_capacity(8 * 1024);
    let mut chunk = [0u8; 8 * 1024];
    let (head_len, status, length) = loop {
        let n = stream.read(&mut chunk).map_err(|e| read_failed(&e))?;
        if n == 0 {
            return Err("evd closed the connection without answering".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let length = resp
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| std::str::from_utf8(h.value).ok())
                    .and_then(|v| v.trim().parse::<usize>().ok());
                break (len, resp.code.unwrap_or(0), length);
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) => {
                return Err("evd's answer has no end of headers".into())
            }
            Err(e) => return Err(format!("evd's answer is not HTTP ({e})")),
        }
    };
    if status != 200 {
        return Err(format!("evd answered HTTP {status}"));
    }
    let length = length.ok_or("evd's answer gives no length")?;
    if length > MAX_ANSWER {
        return Err(format!("evd's answer is too large ({length} bytes)"));
    }
    let mut body = buf.split_off(head_len);
    body.truncate(length);
    if body.len() < length {
        body.reserve_exact(length - body.len());
        let missing = length - body.len();
        Read::take(&mut *stream, missing as u64)
            .read_to_end(&mut body)
            .map_err(|e| read_failed(&e))?;
        if body.len() < length {
            return Err("evd closed the connection before its answer was whole".into());
        }
    }
    Ok(body)
}

fn read_failed(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "evd did not answer in time".into()
        }
        _ => format!("reading evd's answer failed: {e}"),
    }
}
