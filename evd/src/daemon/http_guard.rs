//! A check on HTTP requests before JSON-RPC sees them: a request whose `id` is neither a
//! string, an integer nor null (`1e400`, `1.5`, `[1]`) is answered with a JSON-RPC
//! "invalid request" error. Left to the JSON-RPC layer, such a request is taken for a
//! notification: it is dropped unrun, and its client gets a bare `null` instead of an error.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use jsonrpsee::core::http_helpers::{read_body, Body as HttpBody, Request, Response};
use jsonrpsee::core::BoxError;

/// The layer, for `set_http_middleware`.
#[derive(Clone, Copy, Default)]
pub struct ValidIdsLayer;

impl<S> tower::Layer<S> for ValidIdsLayer {
    type Service = ValidIds<S>;
    fn layer(&self, inner: S) -> ValidIds<S> {
        ValidIds { inner }
    }
}

#[derive(Clone)]
pub struct ValidIds<S> {
    inner: S,
}

/// The `id` of one request, as written.
#[derive(serde::Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow, default)]
    id: Option<&'a serde_json::value::RawValue>,
}

/// Whether the JSON text `raw` may stand as a JSON-RPC id: null, a string, or an integer.
fn valid_id(raw: &str) -> bool {
    let t = raw.trim();
    if t == "null" || t.starts_with('"') {
        return true;
    }
    t.parse::<i64>().is_ok() || t.parse::<u64>().is_ok()
}

/// Whether some request object in `body` has an unusable id.
fn bad_id(body: &[u8]) -> bool {
    let bad = |r: &IdOnly| r.id.is_some_and(|id| !valid_id(id.get()));
    if let Ok(one) = serde_json::from_slice::<IdOnly>(body) {
        return bad(&one);
    }
    match serde_json::from_slice::<Vec<IdOnly>>(body) {
        Ok(batch) => batch.iter().any(bad),
        // Not JSON-RPC shaped: the JSON-RPC layer answers that itself.
        Err(_) => false,
    }
}

fn invalid_id_response() -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32600,
            "message": "Invalid request: \"id\" must be a string, an integer or null",
        }
    })
    .to_string();
    let mut r = Response::new(HttpBody::from(body));
    if let Ok(v) = "application/json; charset=utf-8".parse() {
        r.headers_mut().insert("content-type", v);
    }
    r
}

impl<S, B> tower::Service<Request<B>> for ValidIds<S>
where
    S: tower::Service<Request<HttpBody>, Response = Response, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mut inner = self.inner.clone();
        // A WebSocket upgrade (or any GET) has no body to look at.
        if req.method() != "POST" {
            return Box::pin(inner.call(req.map(HttpBody::new)));
        }
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let (bytes, _) =
                match read_body(&parts.headers, body, proto::rpc::MAX_REQUEST_BYTES).await {
                    Ok(b) => b,
                    // Too large or unreadable: rebuild nothing; let the JSON-RPC layer refuse it
                    // from an empty body with its own message.
                    Err(e) => {
                        tracing::debug!(error = %e, "unreadable request body");
                        (Vec::new(), false)
                    }
                };
            if bad_id(&bytes) {
                return Ok(invalid_id_response());
            }
            inner
                .call(Request::from_parts(parts, HttpBody::from(bytes)))
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_strings_integers_and_null_are_ids() {
        assert!(!bad_id(br#"{"jsonrpc":"2.0","id":7,"method":"m"}"#));
        assert!(!bad_id(br#"{"jsonrpc":"2.0","id":"a","method":"m"}"#));
        assert!(!bad_id(br#"{"jsonrpc":"2.0","method":"m"}"#));
        assert!(bad_id(br#"{"jsonrpc":"2.0","id":1e400,"method":"m"}"#));
        assert!(bad_id(br#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#));
        assert!(bad_id(br#"[{"id":1},{"id":[1]}]"#));
    }
}
