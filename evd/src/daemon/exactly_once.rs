//! Exactly-once writes: every write a client sends carries a request id, and a write is applied
//! at most once for it. A retry of a write that was done gets the first answer (kept durably in
//! the store's request log before the answer goes out); a write whose tick landed but whose
//! answer was lost is told so; a write that waited longer than its client does is not applied.
//! It decides whether to run a write; what the write does is the verb's.

use std::time::{Duration, Instant};

use proto::rpc::{codes, Refusal};

use crate::open::OpenStore;

/// The mark on a write key whose answer is kept even though it appends no tick.
pub(super) const RECORD_ALWAYS: &str = "r";

/// What a write is remembered by: the client's request id and a digest of the whole request, so
/// that a retry (the same request, byte for byte) finds it, while another write a client sends
/// with the same id (one `check --run` appends several receipts) is a write of its own.
pub(super) fn write_key<T: serde::Serialize>(method: &str, req: &T) -> Option<String> {
    use sha2::Digest;
    let bytes = serde_json::to_vec(req).ok()?;
    let mut h = sha2::Sha256::new();
    h.update(method.as_bytes());
    h.update([0]);
    h.update(&bytes);
    let digest = h.finalize();
    Some(digest[..8].iter().map(|b| format!("{b:02x}")).collect())
}

/// Run the write `op` at most once for its request id: a retry of a write that was done gets
/// the first answer; one whose tick landed but whose answer was lost is told so; one whose
/// client stopped waiting before it could start is not applied. The answer is durable in the
/// request log before it goes out (see [`crate::store::requests`]).
pub(super) fn exactly_once<R, F>(
    store: &mut OpenStore,
    ctx: &proto::rpc::Context,
    key: Option<String>,
    arrived: Instant,
    op: F,
) -> Result<R, Refusal>
where
    F: FnOnce(&mut OpenStore) -> Result<R, Refusal>,
    R: serde::Serialize + serde::de::DeserializeOwned,
{
    use crate::store::requests::Seen;
    let id = match ctx.request_id.as_deref() {
        None => None,
        Some(id) if crate::store::requests::valid_id(id) => {
            Some(format!("{id}.{}", key.as_deref().unwrap_or("-")))
        }
        Some(_) => {
            return Err(Refusal::new(
                codes::REFUSED,
                "request_id",
                format!(
                    "a request id is 1 to {} letters, digits, '-' or '_'",
                    crate::store::requests::MAX_ID_BYTES
                ),
            ))
        }
    };
    if let Some(id) = &id {
        if store.exists()? {
            match store.requests.lookup(id) {
                Some(Seen::Done { answer: Some(a) }) => {
                    return serde_json::from_value(a).map_err(|e| {
                        Refusal::new(
                            codes::INTERNAL,
                            "internal",
                            format!("the recorded answer to request {id} is unreadable: {e}"),
                        )
                    });
                }
                Some(Seen::Done { answer: None }) => return Err(already_applied(id, None)),
                Some(Seen::Intent { tick } | Seen::Recovered { tick })
                    if store.ticks_dir().join(&tick).is_file() =>
                {
                    // Its daemon died before the answer; the daemon that took the store
                    // since journaled it if need be (`OpenStore::journal_crashed_writes`).
                    return Err(already_applied(
                        id,
                        Some(format!("as tick {tick} (see `evctl show {tick}`)")),
                    ));
                }
                // The batch landed (its first line is there, as it was to be) but the answer
                // was lost: it is not appended twice.
                Some(Seen::LedgerIntent { seq, hash })
                    if store.ledger.line_hash(seq).as_deref() == Some(hash.as_str()) =>
                {
                    return Err(already_applied(
                        id,
                        Some(format!("in the ledger from seq {seq}")),
                    ));
                }
                _ => {}
            }
        }
    }
    if let Some(wait) = ctx.wait_ms {
        let waited = arrived.elapsed();
        if waited > Duration::from_millis(wait) {
            return Err(Refusal::new(
                codes::EXPIRED,
                "expired",
                format!(
                    "not applied: this write waited {:.1} s for the store, longer than its client \
                     waits ({:.1} s); nothing was written",
                    waited.as_secs_f64(),
                    Duration::from_millis(wait).as_secs_f64()
                ),
            ));
        }
    }
    store.current_request = id.clone();
    store.current_agent = ctx.agent_id.clone().filter(|a| !a.is_empty());
    let writes = store.writes;
    let out = op(store);
    store.current_request = None;
    store.current_agent = None;
    // Only a write that wrote is remembered (a dry run, a refusal or a no-op leaves no trace):
    // ticks appended, or, for writes that append no tick (receipts), the caller says so.
    let wrote =
        store.writes != writes || key.as_deref().is_some_and(|k| k.starts_with(RECORD_ALWAYS));
    // No acknowledged write without its journal event: what it journaled (a tick recorded, a
    // receipt appended) is durable in the ledger before the answer goes out.
    if wrote && out.is_ok() {
        store.write_journal();
        crate::crash_point!("write.journaled");
    }
    if let (Some(id), Ok(answer), true) = (&id, &out, wrote) {
        match serde_json::to_value(answer) {
            Ok(v) => {
                if let Err(e) = store.requests.done(id, v) {
                    tracing::warn!(error = %e, "cannot record a write's answer; a retry will be told it was applied");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode a write's answer for the request log")
            }
        }
    }
    out
}

fn already_applied(id: &str, what: Option<String>) -> Refusal {
    let what = what.unwrap_or_else(|| "already".to_string());
    Refusal::new(
        codes::ALREADY_APPLIED,
        "already_applied",
        format!(
            "this write (request {id}) was recorded {what} before its answer was lost; nothing \
             was written again"
        ),
    )
}
