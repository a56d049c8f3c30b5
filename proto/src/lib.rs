//! The shared language of evd and evctl: the ev 0.1.27–0.1.32 model, its canonical JSON and ids, the
//! frozen golden vectors, and the RPC contract. Pure: nothing here touches the filesystem, the
//! network, a clock or a process.

pub mod evidence;
pub mod golden;
pub mod head;
pub mod id;
pub mod json;
pub mod model;
pub mod pathspec;
pub mod rpc;
pub mod shell;
pub mod vocab;

pub use model::{Check, Ground, Liveness, SourceRef, Tick};
