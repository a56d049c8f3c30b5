//! What the language server's loop and its two helper threads (`watch`, `commands`) share:
//! the events the threads send the loop, the editor's configuration, and the runtime each
//! thread drives its evd session on. No behaviour of the loop's own.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use lsp_server::RequestId;
use lsp_types::MessageType;
use proto::rpc::GuardsResult;
use serde_json::Value;

/// What the threads tell the loop.
pub enum Event {
    /// A fresh `ev.guards` answer, or why there is none.
    Guards(Result<Arc<GuardsResult>, String>),
    Log(MessageType, String),
    Show(MessageType, String),
    /// A command's result.
    Reply(RequestId, Result<Value, (i32, String)>),
    /// A draft for the editor to open.
    ShowDocument(PathBuf),
}

/// The single-threaded runtime a helper thread (`watch`, `commands`) drives its session on. When
/// none can be built, the loop is told `evctl lsp: {what}: {error}` and there is none.
pub fn thread_runtime(events: &Sender<Event>, what: &str) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            let _ = events.send(Event::Log(
                MessageType::ERROR,
                format!("evctl lsp: {what}: {e}"),
            ));
            None
        }
    }
}

/// What the editor asked for in `initializationOptions`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The platform `ev.checkRun` speaks for (default `local`).
    pub platform: String,
    pub test_limit: Duration,
}
