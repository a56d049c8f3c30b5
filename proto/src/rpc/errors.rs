//! The error envelope: [`Refusal`] (a code, a reason and a message) and its JSON-RPC form, with
//! the codes clients act on.

use super::context::Warning;
use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};

/// JSON-RPC error codes of refusals (the params-shape code -32602 is jsonrpsee's own). They sit
/// in the implementation-defined server range and clear of the codes jsonrpsee itself answers
/// with (-32000 to -32011: oversized requests and responses, busy, batch limits), so a client can
/// always tell which said what.
pub mod codes {
    pub const NO_STORE: i32 = -32040;
    pub const NOT_FOUND: i32 = -32041;
    pub const REFUSED: i32 = -32042;
    pub const IO: i32 = -32043;
    /// The store is owned by another daemon (or another user's).
    pub const LOCKED: i32 = -32044;
    /// The store path itself is unusable (a symlink, not a directory, …).
    pub const BAD_STORE: i32 = -32045;
    /// The daemon is stopping and did not run the request: reconnect (to a new one) and retry.
    pub const STOPPING: i32 = -32046;
    /// A write waited past the time its client waits for an answer, and was not applied.
    pub const EXPIRED: i32 = -32047;
    /// A retried write was applied before (its tick is in the store), but its answer was lost.
    pub const ALREADY_APPLIED: i32 = -32048;
    /// The store's thread has been busy past its deadline (stuck on one request): the request
    /// was not run. Other stores are unaffected; `evctl status` names what it is stuck on.
    pub const STORE_BUSY: i32 = -32049;
    pub const INTERNAL: i32 = -32603;
}

/// The `data` of every refusal: a stable slug, upstream's exact message (what follows
/// `error: `; where upstream names itself, `ev <verb>`, this names `evctl <verb>`, the program
/// the user runs), and the warnings emitted before the refusal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefusalData {
    pub reason: String,
    pub message: String,
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

/// A refusal as evd raises it and evctl renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i32,
    pub reason: String,
    pub message: String,
    pub warnings: Vec<Warning>,
}

impl Refusal {
    pub fn new(code: i32, reason: &str, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            reason: reason.into(),
            message: message.into(),
            warnings: Vec::new(),
        }
    }
    pub fn refused(reason: &str, message: impl Into<String>) -> Refusal {
        Refusal::new(codes::REFUSED, reason, message)
    }
    pub fn io(message: impl Into<String>) -> Refusal {
        Refusal::new(codes::IO, "io", message)
    }
    pub fn no_store() -> Refusal {
        Refusal::new(codes::NO_STORE, "no_store", NO_STORE_MESSAGE)
    }
    pub fn with_warnings(mut self, w: Vec<Warning>) -> Refusal {
        self.warnings = w;
        self
    }
    /// Recover a refusal from a JSON-RPC error object.
    pub fn from_error_object(e: &ErrorObjectOwned) -> Refusal {
        let data = e
            .data()
            .and_then(|raw| serde_json::from_str::<RefusalData>(raw.get()).ok());
        match data {
            Some(d) => Refusal {
                code: e.code(),
                reason: d.reason,
                message: d.message,
                warnings: d.warnings,
            },
            None => Refusal::new(e.code(), "rpc", e.message().to_string()),
        }
    }
}

impl From<Refusal> for ErrorObjectOwned {
    fn from(r: Refusal) -> Self {
        let data = RefusalData {
            reason: r.reason,
            message: r.message.clone(),
            warnings: r.warnings,
        };
        ErrorObjectOwned::owned(r.code, r.message, Some(data))
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The refusal text for a missing store (the inner backticks are literal).
pub const NO_STORE_MESSAGE: &str = "no .evolving/ store here — run `evctl init` first";
