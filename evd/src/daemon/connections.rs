//! Client connections, kept from locking the owner out.
//!
//! Every accepted connection is tracked: whether it is in the middle of sending a request,
//! waiting for an answer, subscribed, or idle. A connection that does not deliver a complete
//! request within [`REQUEST_DEADLINE`] of connecting or of starting one (a silent socket, an
//! HTTP body sent a byte a second, a WebSocket frame that never ends) is closed. One idle
//! between requests, with no subscription, for [`IDLE_LIMIT`] is closed. And when
//! [`SOFT_CAP`] connections are open, a new one first pushes out the longest-idle ones, so a
//! crowd of silent clients can delay the owner's `evctl list` by nothing. Past [`HARD_CAP`],
//! with nothing idle to push out, new connections are refused.
//!
//! What is in flight is learned from two places: the bytes a connection reads and writes
//! ([`Tracked`], a wrapper around the socket) and the calls it makes ([`CallTracking`], an RPC
//! middleware). A call being answered is never cut, however long it takes.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use jsonrpsee::server::middleware::rpc::{Batch, Notification, RpcServiceT};
use jsonrpsee::types::Request;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

/// How long a connection has to deliver a complete request, from connecting or from the first
/// byte of a request.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// How long a connection with no subscription may sit idle between requests.
pub const IDLE_LIMIT: Duration = Duration::from_secs(30);

/// Open connections past which a new one pushes out the longest-idle ones.
pub const SOFT_CAP: usize = 256;

/// Open connections past which a new one is refused when none is idle.
pub const HARD_CAP: usize = 4096;

/// Methods whose call opens a subscription (the connection then legitimately stays silent).
const SUBSCRIBING: &[&str] = &["ev.watch", "ev.migrate.backfill"];

/// What one connection is doing.
pub struct ConnState {
    epoch: Instant,
    /// Milliseconds since `epoch` of the last byte read or written.
    last_activity: AtomicU64,
    /// Milliseconds since `epoch` + 1 at which the client began something it has not finished
    /// (connecting counts); 0 when nothing is owed.
    owed_since: AtomicU64,
    in_flight: AtomicUsize,
    subscribed: AtomicBool,
    answered: Arc<AtomicU64>,
    /// Cancelled to close the connection.
    pub close: CancellationToken,
}

impl ConnState {
    fn new(epoch: Instant, answered: Arc<AtomicU64>) -> ConnState {
        let now = ms(epoch);
        ConnState {
            answered,
            epoch,
            last_activity: AtomicU64::new(now),
            owed_since: AtomicU64::new(now + 1),
            in_flight: AtomicUsize::new(0),
            subscribed: AtomicBool::new(false),
            close: CancellationToken::new(),
        }
    }

    fn touched(&self) {
        self.last_activity.store(ms(self.epoch), Ordering::Relaxed);
    }

    /// Bytes arrived: if nothing was owed, a request has begun.
    fn read_some(&self) {
        self.touched();
        let now = ms(self.epoch) + 1;
        let _ = self
            .owed_since
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The server wrote (an answer, a handshake): what the client sent was complete.
    fn wrote_some(&self) {
        self.touched();
        self.owed_since.store(0, Ordering::Relaxed);
    }

    fn begin_call(&self, method: &str) {
        self.owed_since.store(0, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if SUBSCRIBING.contains(&method) {
            self.subscribed.store(true, Ordering::SeqCst);
        }
    }

    fn end_call(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.answered.fetch_add(1, Ordering::Relaxed);
        self.touched();
    }

    /// Nothing in flight, no subscription, nothing half sent: safe to close.
    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
            && !self.subscribed.load(Ordering::SeqCst)
            && self.owed_since.load(Ordering::Relaxed) == 0
    }

    /// Why this connection should be closed now, if it should.
    fn verdict(&self, now_ms: u64) -> Option<&'static str> {
        if self.in_flight.load(Ordering::SeqCst) > 0 || self.subscribed.load(Ordering::SeqCst) {
            return None;
        }
        let owed = self.owed_since.load(Ordering::Relaxed);
        if owed != 0 && now_ms.saturating_sub(owed - 1) >= millis(REQUEST_DEADLINE) {
            return Some("no complete request in time");
        }
        let last = self.last_activity.load(Ordering::Relaxed);
        if owed == 0 && now_ms.saturating_sub(last) >= millis(IDLE_LIMIT) {
            return Some("idle");
        }
        None
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn ms(epoch: Instant) -> u64 {
    millis(epoch.elapsed())
}

/// Every open connection.
pub struct Connections {
    epoch: Instant,
    /// Calls answered since the last sweep (the sweep then gives freed heap back).
    answered: Arc<AtomicU64>,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
}

impl Default for Connections {
    fn default() -> Connections {
        Connections {
            epoch: Instant::now(),
            answered: Arc::new(AtomicU64::new(0)),
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        }
    }
}

/// A connection admitted; dropping it forgets the connection.
pub struct Admitted {
    pub state: Arc<ConnState>,
    id: u64,
    all: Arc<Connections>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Ok(mut m) = self.all.open.lock() {
            m.remove(&self.id);
        }
    }
}

impl Connections {
    pub fn count(&self) -> usize {
        self.open.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Admit one more connection, first pushing out the longest-idle ones when at the soft cap.
    /// `None`: refused (the hard cap, and nothing idle to push out).
    pub fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut m = self.open.lock().ok()?;
        if m.len() >= SOFT_CAP {
            let mut idle: Vec<(u64, u64)> = m
                .iter()
                .filter(|(_, c)| c.idle() && !c.close.is_cancelled())
                .map(|(id, c)| (c.last_activity.load(Ordering::Relaxed), *id))
                .collect();
            idle.sort_unstable();
            // Make room for this one and a few more, so a crowd is not re-scanned per accept.
            let excess = m.len() + 1 - SOFT_CAP + SOFT_CAP / 16;
            for (_, id) in idle.into_iter().take(excess) {
                if let Some(c) = m.remove(&id) {
                    c.close.cancel();
                }
            }
            if m.len() >= HARD_CAP {
                return None;
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState::new(self.epoch, Arc::clone(&self.answered)));
        m.insert(id, Arc::clone(&state));
        Some(Admitted {
            state,
            id,
            all: Arc::clone(self),
        })
    }

    /// Close every connection that overstayed; returns how many were closed. When calls were
    /// answered since the last sweep, the heap their answers used is given back to the system
    /// (a large `list` or `log` must not leave the daemon at its peak).
    pub fn sweep(&self) -> usize {
        if self.answered.swap(0, Ordering::Relaxed) > 0 {
            crate::sys::resources::release_free_memory();
        }
        let now = ms(self.epoch);
        let Ok(mut m) = self.open.lock() else {
            return 0;
        };
        let mut closed = 0;
        m.retain(|_, c| match c.verdict(now) {
            Some(why) => {
                tracing::debug!(why, "closing a connection");
                c.close.cancel();
                closed += 1;
                false
            }
            None => true,
        });
        closed
    }
}

/// A socket whose reads and writes are reported to its [`ConnState`], and which ends (reads
/// end-of-file, writes fail) once the connection is told to close. It owns the connection's
/// admission: the connection counts as open for exactly as long as its socket lives, through a
/// WebSocket upgrade (served by a task of its own) too.
pub struct Tracked<S> {
    inner: S,
    admitted: Admitted,
    closed: Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl<S> Tracked<S> {
    pub fn new(inner: S, admitted: Admitted) -> Tracked<S> {
        let closed = Box::pin(admitted.state.close.clone().cancelled_owned());
        Tracked {
            inner,
            admitted,
            closed,
        }
    }

    fn is_closed(&mut self, cx: &mut Context<'_>) -> bool {
        self.closed.as_mut().poll(cx).is_ready()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.is_closed(cx) {
            return Poll::Ready(Ok(())); // end of file
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.admitted.state.read_some();
        }
        r
    }
}

fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "evd closed this connection")
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.is_closed(cx) {
            return Poll::Ready(Err(closed_error()));
        }
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.admitted.state.wrote_some();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.is_closed(cx) {
            return Poll::Ready(Err(closed_error()));
        }
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.admitted.state.wrote_some();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The RPC middleware that tells a connection's [`ConnState`] when a call starts and ends.
#[derive(Clone)]
pub struct CallTracking<S> {
    pub inner: S,
    pub state: Arc<ConnState>,
}

impl<S> RpcServiceT for CallTracking<S>
where
    S: RpcServiceT + Send + Sync + Clone + 'static,
{
    type MethodResponse = S::MethodResponse;
    type NotificationResponse = S::NotificationResponse;
    type BatchResponse = S::BatchResponse;

    fn call<'a>(
        &self,
        request: Request<'a>,
    ) -> impl Future<Output = Self::MethodResponse> + Send + 'a {
        let state = Arc::clone(&self.state);
        state.begin_call(request.method_name());
        let inner = self.inner.clone();
        async move {
            let out = inner.call(request).await;
            state.end_call();
            out
        }
    }

    fn batch<'a>(&self, batch: Batch<'a>) -> impl Future<Output = Self::BatchResponse> + Send + 'a {
        let state = Arc::clone(&self.state);
        state.begin_call("batch");
        let inner = self.inner.clone();
        async move {
            let out = inner.batch(batch).await;
            state.end_call();
            out
        }
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl Future<Output = Self::NotificationResponse> + Send + 'a {
        let state = Arc::clone(&self.state);
        state.begin_call("notification");
        let inner = self.inner.clone();
        async move {
            let out = inner.notification(n).await;
            state.end_call();
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_owes_a_request_from_the_start_and_is_idle_once_answered() {
        let c = ConnState::new(Instant::now(), Arc::default());
        assert!(!c.idle());
        let deadline = millis(REQUEST_DEADLINE);
        assert_eq!(c.verdict(deadline - 10), None);
        assert!(c.verdict(deadline + 10).is_some());
        c.begin_call("ev.list");
        assert_eq!(
            c.verdict(deadline * 100),
            None,
            "a call in flight is never cut"
        );
        c.end_call();
        assert!(c.idle());
        c.read_some();
        assert!(!c.idle(), "a request has begun");
        c.wrote_some();
        assert!(c.idle());
        c.begin_call("ev.watch");
        c.end_call();
        assert!(!c.idle(), "a subscriber is never idle");
        assert_eq!(c.verdict(u64::MAX / 2), None);
    }

    #[test]
    fn at_the_soft_cap_a_new_connection_pushes_out_the_idlest() {
        let all = Arc::new(Connections::default());
        let mut kept = Vec::new();
        for _ in 0..SOFT_CAP {
            let a = all.admit().expect("admitted");
            a.state.wrote_some(); // answered: idle
            kept.push(a);
        }
        let busy = all.admit().expect("admitted");
        assert!(all.count() < SOFT_CAP);
        let closed = kept.iter().filter(|a| a.state.close.is_cancelled()).count();
        assert!(closed > 0);
        assert!(!busy.state.close.is_cancelled());
    }
}
